"""Credentials in URLs stay out of the logs: a real gunicorn with the
deployment's config (bms/gunicorn_conf.py) and a real `manage.py runserver` are sent
`?apikey=SECRET...`; neither log keeps the secret."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from core.log_scrub import MASK, ScrubSecretsFilter, scrub
from tests.live_http import free_port
from tests.processes import stop_process
from tests.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
# Not 32 characters, so the ingest view refuses the key without a database query.
QUERY = "node=x&json=a:1&apikey=SECRETAPIKEY&token=SECRETTOKEN&password=SECRETPW&csv=1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "GET /input/post?apikey=abc&node=1 HTTP/1.1",
            f"GET /input/post?apikey={MASK}&node=1 HTTP/1.1",
        ),
        ("devicekey=k1;token=t2", f"devicekey={MASK};token={MASK}"),
        ("a=1&PassWord=x&api_key=y", f"a=1&PassWord={MASK}&api_key={MASK}"),
        ("secret=&node=2", "secret=&node=2"),  # nothing to hide
        ("/feed/data.json?id=3&start=1", "/feed/data.json?id=3&start=1"),
        ('"GET /x?access_token=zz HTTP/1.1" 200', f'"GET /x?access_token={MASK} HTTP/1.1" 200'),
    ],
)
def test_scrub(text, expected):
    assert scrub(text) == expected


def test_filter_rewrites_a_formatted_record():
    record = logging.LogRecord(
        "django.server", logging.INFO, __file__, 1, '"%s" %s %s',
        ("GET /input/post?apikey=SECRET HTTP/1.1", "200", "2"), None,
    )  # fmt: skip
    assert ScrubSecretsFilter().filter(record) is True
    assert "SECRET" not in record.getMessage() and f"apikey={MASK}" in record.getMessage()


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        BMS_DATA_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3",
        ALLOWED_HOSTS="127.0.0.1",
        PYTHONPATH=str(ROOT),
    )


def _get_until_up(url: str, timeout_s: float = 30.0, **headers: str) -> int:
    """GET `url` once the server answers; its status."""

    def status() -> int | None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5):
                return 200
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None  # not listening yet

    return wait_for(status, timeout_s, f"an answer from {url}")


def _wait_for_line(path: Path, text: str, timeout_s: float = 20.0) -> None:
    """The request is logged after its response is sent: wait for the line before the server
    is stopped (stopping at once lost it under load, 1 run in a full parallel suite)."""
    wait_for(lambda: text in path.read_text(errors="replace"), timeout_s, f"{text!r} in {path}")


def test_gunicorn_access_log_keeps_no_key(tmp_path, redis_client):
    port = free_port()
    access_log = tmp_path / "access.log"
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "-c", "python:bms.gunicorn_conf",
         "bms.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--access-logfile", str(access_log)],
        cwd=ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        status = _get_until_up(
            f"http://127.0.0.1:{port}/input/post?{QUERY}",
            Referer=f"http://example.org/setup?apikey=SECRETREFERER&{QUERY}",
        )
        assert status == 401
        _wait_for_line(access_log, "/input/post?node=x")
    finally:
        stop_process(server)
    stderr = server.stderr.read().decode()
    text = access_log.read_text()
    assert "/input/post?node=x" in text, (text, stderr)
    assert "SECRET" not in text and "SECRET" not in stderr
    assert f"apikey={MASK}" in text and f"token={MASK}" in text and f"password={MASK}" in text


def test_the_deployment_scripts_use_the_scrubbing_config():
    for script in ("docker/entrypoint.sh", "scripts/run-site.sh"):
        assert "gunicorn -c python:bms.gunicorn_conf" in (ROOT / script).read_text().replace(
            '"$VENV/bin/gunicorn"', "gunicorn"
        ), script


def test_runserver_request_log_keeps_no_key(tmp_path, redis_client):
    port = free_port()
    log = tmp_path / "runserver.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks",
             f"127.0.0.1:{port}"],
            cwd=ROOT, env=_env(tmp_path), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        assert _get_until_up(f"http://127.0.0.1:{port}/input/post?{QUERY}") == 401
        _wait_for_line(log, "/input/post?node=x")
    finally:
        stop_process(server)
    output = log.read_text(errors="replace")
    assert "/input/post?node=x" in output, output
    assert "SECRET" not in output and f"apikey={MASK}" in output
