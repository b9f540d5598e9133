"""The compose file and Dockerfile describe the deployment DESIGN.md asks for.

The Docker engine cannot run on the CI machine, so the compose file is validated by
`docker compose config` (or docker-compose v1) when one is installed, and its shape checked
with a YAML parser always.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_has_every_service(compose):
    assert {"proxy", "web", "worker", "worker-control", "beat", "redis", "postgres"} <= set(
        compose["services"]
    )


def test_only_the_proxy_publishes_ports(compose):
    """Gunicorn on 0.0.0.0:8000 let 40 slow connections take the site down.
    Only nginx (docker/nginx.conf, tests/security/test_proxy.py) faces the network."""
    published = {name for name, svc in compose["services"].items() if svc.get("ports")}
    assert published == {"proxy"}
    assert {str(p).split(":")[-1] for p in compose["services"]["proxy"]["ports"]} == {"443", "80"}
    assert compose["services"]["web"]["environment"]["BMS_TRUSTED_PROXIES"] == "1"
    assert compose["services"]["proxy"]["build"]["target"] == "proxy"


def test_networks_follow_the_security_model(compose):
    """docs/SECURITY.md: frontend holds only the proxy and web; the backend network is
    internal and holds everything else; Redis and PostgreSQL are on nothing else."""
    assert compose["networks"]["backend"]["internal"] is True
    on = {
        name: set(svc.get("networks", []))
        for name, svc in compose["services"].items()
    }  # fmt: skip
    assert {name for name, nets in on.items() if "frontend" in nets} == {"proxy", "web"}
    assert {name for name, nets in on.items() if "backend" in nets} == {
        "web", "worker", "worker-control", "beat", "redis", "postgres", "bacnet-cov",
        "bacnet-server",
    }  # fmt: skip
    assert on["redis"] == on["postgres"] == {"backend"}
    assert on["proxy"] == {"frontend"}
    assert "plant" in (DOCKER / "compose.yaml").read_text()  # where the relays attach


def test_bacnet_processes_are_one_each_behind_a_profile(compose):
    """docs/BACNET.md: `--profile bacnet` starts the COV client and the site's BACnet device,
    each its entrypoint role, one of each, never on the front network."""
    entry = (DOCKER / "entrypoint.sh").read_text()
    for name, command in (("bacnet-cov", "bacnet_cov"), ("bacnet-server", "bacnet_server")):
        svc = compose["services"][name]
        assert svc["command"] == [name] and svc["profiles"] == ["bacnet"]
        assert f"exec python manage.py {command}" in entry
        assert "frontend" not in svc["networks"] and "replicas" not in str(svc)
        # The shared environment as well as its own (the database, Redis, the secret key).
        assert "DATABASE_URL" in svc["environment"] and "BMS_BACNET_ADDRESS" in svc["environment"]
    server = compose["services"]["bacnet-server"]["environment"]
    assert server["BMS_BACNET_SERVER_ENABLED"] == "${BMS_BACNET_SERVER_ENABLED:-false}"


def test_compose_has_no_default_secrets(compose):
    """No `change-me` fallback: an unset POSTGRES_PASSWORD or SECRET_KEY stops compose."""
    text = (DOCKER / "compose.yaml").read_text()
    assert "change-me" not in text
    assert (
        "${POSTGRES_PASSWORD:?"
        in compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
    )
    assert "${POSTGRES_PASSWORD:?" in compose["services"]["web"]["environment"]["DATABASE_URL"]
    assert compose["services"]["web"]["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")
    example = dict(
        line.split("=", 1)
        for line in (DOCKER / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert example["POSTGRES_PASSWORD"] == "" and example["SECRET_KEY"] == ""


def test_redis_keeps_accepted_readings_with_appendonly(compose):
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"


def test_data_lives_in_volumes(compose):
    assert {"feeds-data", "redis-data", "postgres-data"} <= set(compose["volumes"])
    for role in ("web", "worker", "beat"):
        assert "feeds-data:/data" in compose["services"][role]["volumes"]


def test_web_runs_gunicorn_and_only_one_beat(compose):
    entry = (DOCKER / "entrypoint.sh").read_text()
    # With the config that masks node keys in the access log (bms/gunicorn_conf.py).
    assert "gunicorn -c python:bms.gunicorn_conf bms.wsgi:application" in entry
    beats = [name for name, svc in compose["services"].items() if svc.get("command") == ["beat"]]
    assert beats == ["beat"]
    assert "replicas" not in str(compose["services"]["beat"])


def test_dockerfile_is_multi_stage_non_root_and_collects_static():
    text = (DOCKER / "Dockerfile").read_text()
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 3
    assert "\nUSER bms" in text
    assert "collectstatic" in text


def _compose_command() -> list[str] | None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:  # not the docker client without the compose plugin
            return command
    return None


def _compose_config(command: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in {"POSTGRES_PASSWORD", "SECRET_KEY"}}
    return subprocess.run(
        [*command, "-f", str(DOCKER / "compose.yaml"), "--env-file", str(DOCKER / ".env.example"),
         "config", "-q"],
        capture_output=True, text=True, timeout=60, env={**environ, **env},
    )  # fmt: skip


@pytest.mark.skipif(
    not (shutil.which("docker-compose") or shutil.which("docker")), reason="no compose client"
)
def test_compose_config_validates_and_refuses_missing_secrets():
    command = _compose_command()
    if command is None:
        pytest.skip("docker present but without the compose plugin")
    result = _compose_config(command, POSTGRES_PASSWORD="pw-from-env", SECRET_KEY="k" * 50)
    assert result.returncode == 0, result.stderr
    # The example as shipped has empty secrets: compose stops and names the variable.
    refused = _compose_config(command, SECRET_KEY="k" * 50)
    assert refused.returncode != 0
    assert "set POSTGRES_PASSWORD in docker/.env" in refused.stderr
