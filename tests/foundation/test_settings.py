"""Settings come from the environment; bad values stop start-up with the variable named."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import (
    env_bool,
    env_float,
    env_host_port,
    env_int,
    env_ipv4_interface,
    env_list,
    env_str,
    read_dotenv,
)

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


@pytest.mark.parametrize(
    "value", ["192.168.60.1", "192.168.60.1:47808", "bbmd.plant.example", "bbmd:65535", ""]
)
def test_a_bbmd_is_a_host_with_an_optional_port(monkeypatch, value):
    monkeypatch.setenv("X_BBMD", value)
    assert env_host_port("X_BBMD", "") == value


@pytest.mark.parametrize(
    "value",
    ["192.168.60.1:0", "192.168.60.1:65536", "192.168.60.1:x", "300.1.1.1", "bbmd_1", "a b",
     "192.168.60.1:47808:1", "-bbmd"],
)  # fmt: skip
def test_a_bad_bbmd_is_refused_naming_the_setting(monkeypatch, value):
    monkeypatch.setenv("BMS_BACNET_BBMD", value)
    with pytest.raises(ImproperlyConfigured, match=r"^BMS_BACNET_BBMD=.* is not \"host\""):
        env_host_port("BMS_BACNET_BBMD", "")


@pytest.mark.parametrize(
    ("value", "ok"),
    [("0.0.0.0", True), ("192.168.50.20/24", True), ("192.168.50.20/32", True),
     ("192.168.50.20/33", False), ("192.168.50", False), ("eth0", False), ("::1", False)],
)  # fmt: skip
def test_our_bacnet_address_is_ipv4_with_an_optional_prefix(monkeypatch, value, ok):
    monkeypatch.setenv("BMS_BACNET_ADDRESS", value)
    if ok:
        assert env_ipv4_interface("BMS_BACNET_ADDRESS", "0.0.0.0") == value
    else:
        with pytest.raises(ImproperlyConfigured, match=r"^BMS_BACNET_ADDRESS="):
            env_ipv4_interface("BMS_BACNET_ADDRESS", "0.0.0.0")


def test_a_number_past_its_maximum_is_refused_not_clamped(monkeypatch):
    monkeypatch.setenv("X_PORT", "65535")
    assert env_int("X_PORT", 1, minimum=1, maximum=65535) == 65535  # at the bound
    monkeypatch.setenv("X_PORT", "65536")
    with pytest.raises(ImproperlyConfigured, match=r"^X_PORT=65536 must be at most 65535"):
        env_int("X_PORT", 1, minimum=1, maximum=65535)
    monkeypatch.setenv("X_S", "300.5")
    with pytest.raises(ImproperlyConfigured, match=r"^X_S=300.5 must be at most 300"):
        env_float("X_S", 10.0, minimum=2.0, maximum=300.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [("BMS_BACNET_BBMD", "192.168.60.1:70000"), ("BMS_BACNET_ADDRESS", "192.168.50.20/40"),
     ("BMS_BACNET_SERVER_PORT", "70000"), ("BMS_BACNET_SERVER_NAME", "n" * 65),
     ("BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER", "201"),
     ("BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER", "0"),
     ("BMS_BACNET_SERVER_WRITES_PER_MINUTE", "601"), ("BMS_BACNET_SERVER_WRITES_PER_MINUTE", "0")],
)  # fmt: skip
def test_a_bad_bacnet_setting_stops_start_up_with_its_name(tmp_path, name, value):
    result = _manage("check", BMS_DATA_DIR=str(tmp_path), **{name: value})
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name}" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize(("subscriptions", "writes"), [("1", "1"), ("200", "600")])
def test_the_bacnet_servers_per_sender_bounds_start_at_their_bounds(
    tmp_path, subscriptions, writes
):
    result = _manage(
        "shell", "-c",
        "from django.conf import settings as s; print(s.BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER,"
        " s.BMS_BACNET_SERVER_WRITES_PER_MINUTE)",
        BMS_DATA_DIR=str(tmp_path), BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER=subscriptions,
        BMS_BACNET_SERVER_WRITES_PER_MINUTE=writes,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1].split() == [subscriptions, writes]


def test_sqlite_connections_are_kept_between_requests(tmp_path):
    """A request's end keeps its thread's SQLite connection (CONN_MAX_AGE 60, as PostgreSQL's):
    a new one reads the schema again on its first query, half of a small feed read's CPU
    (#29). Django closes an expired connection on request_started/request_finished; both are
    sent here as a request sends them, in a process of its own with the site's settings."""
    script = (
        "import django\n"
        "django.setup()\n"
        "from django.core.signals import request_finished, request_started\n"
        "from django.db import connection\n"
        "connection.ensure_connection()\n"
        "raw = connection.connection\n"
        "request_started.send(sender=None)\n"
        "connection.cursor().execute('SELECT 1')\n"
        "request_finished.send(sender=None)\n"
        "print(connection.settings_dict['CONN_MAX_AGE'], connection.connection is raw)\n"
    )
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="bms.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        BMS_DATA_DIR=str(tmp_path),
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["60", "True"]
