"""Settings come from the environment; bad values stop start-up with the variable named."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_int, env_list, env_str, read_dotenv

ROOT = Path(__file__).resolve().parents[2]


def test_env_bool_accepts_words_and_refuses_nonsense(monkeypatch):
    monkeypatch.setenv("X_FLAG", "yes")
    assert env_bool("X_FLAG", False) is True
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        env_bool("X_FLAG", False)


def test_env_int_names_the_variable_and_checks_the_minimum(monkeypatch):
    monkeypatch.setenv("X_TICK", "soon")
    with pytest.raises(ImproperlyConfigured, match="X_TICK"):
        env_int("X_TICK", 30)
    monkeypatch.setenv("X_TICK", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("X_TICK", 30, minimum=1)
    monkeypatch.delenv("X_TICK")
    assert env_int("X_TICK", 30) == 30


def test_secrets_can_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET", "default") == "s3cret"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("X_SECRET", "default")


def test_env_list_and_dotenv_do_not_override_the_real_environment(monkeypatch, tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text("# comment\nX_HOSTS=a.example, b.example\nX_REAL=from-file\n")
    monkeypatch.setenv("X_REAL", "from-env")
    monkeypatch.delenv("X_HOSTS", raising=False)
    read_dotenv(dotenv)
    assert env_list("X_HOSTS", []) == ["a.example", "b.example"]
    assert os.environ["X_REAL"] == "from-env"
    monkeypatch.delenv("X_HOSTS")


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env={**clean, "DJANGO_SETTINGS_MODULE": "bms.settings", **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_production_settings_pass_check_deploy_without_warnings(tmp_path):
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING",
        BMS_PRODUCTION="true", SECRET_KEY="x" * 20 + "-a-long-random-production-secret-value",
        BMS_DATA_DIR=str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_the_default_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "bms.settings", "BMS_PRODUCTION": "true",
             "BMS_DATA_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_a_bad_setting_stops_start_up_with_its_name(tmp_path):
    result = _manage("check", BMS_CONTROL_TICK="fast", BMS_DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "BMS_CONTROL_TICK" in result.stderr
