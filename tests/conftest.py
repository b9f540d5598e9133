"""Shared fixtures: staff users by role, API clients, real Redis, a real Celery worker.

Redis is the real one at 127.0.0.1:6379, database 15 unless REDIS_URL says otherwise
(bms/settings_test.py); each test that asks for `redis_client` starts from an empty db.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from core.roles import BOOKERS, ENGINEERS, VIEWERS
from tests.processes import stop_process
from tests.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent


# The longest tests (minutes of real processes, a browser, the docs' live walk-through) go to
# the workers first: the tests are handed out in collection order, and one of them started last
# ran alone for four minutes at the end of a CI run while the other workers sat idle. Put first,
# they all land in the first worker's share, which is why the suite runs with
# `--dist worksteal` (scripts/run-tests.sh): the others take them from it as they run out.
# Only the order changes; each test still stands on its own.
LONG_FIRST = (
    "tests/docs/test_doc_commands.py::test_doc_blocks",
    "tests/security/test_authorization_matrix.py",
    "tests/reliability/",
    "tests/integration/",
    "tests/displays/test_kiosk_browser.py",
    "tests/demo/test_simulate_live.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        for i, prefix in enumerate(LONG_FIRST):
            if item.nodeid.startswith(prefix):
                return i
        return len(LONG_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def fresh_feed_files() -> None:
    """Start each test with no feed files on disk.

    Feed ids restart when a test's database is rolled back or flushed, so without this a test's
    new feed 1 would find the .dat/.meta an earlier test left for its own feed 1.
    """
    from django.conf import settings

    feed_dir = Path(settings.BMS_FEED_DIR)
    if feed_dir.is_dir():
        for path in feed_dir.iterdir():
            if path.is_file() and path.suffix in {".dat", ".meta", ".tmp", ".new"}:
                path.unlink()


@pytest.fixture
def redis_client():
    from core.redis import get_redis

    client = get_redis()
    client.flushdb()
    yield client
    client.flushdb()


def _make_user(username: str, group: str | None, superuser: bool = False) -> User:
    user = User.objects.create_user(
        username=username, password="pw-" + username, is_staff=True, is_superuser=superuser
    )
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def engineer(db) -> User:
    return _make_user("engineer", ENGINEERS)


@pytest.fixture
def booker(db) -> User:
    return _make_user("booker", BOOKERS)


@pytest.fixture
def viewer(db) -> User:
    return _make_user("viewer", VIEWERS)


@pytest.fixture
def superuser(db) -> User:
    return _make_user("root", None, superuser=True)


def _client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def engineer_api(engineer) -> APIClient:
    return _client_for(engineer)


@pytest.fixture
def booker_api(booker) -> APIClient:
    return _client_for(booker)


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    return _client_for(viewer)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


def test_database_url() -> str:
    """A DATABASE_URL for the test database, so another process can share it."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] or "postgres"
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


test_database_url.__test__ = False  # not a test, despite the name


def wait_for_worker(timeout_s: float = 30.0) -> None:
    from bms.celery import app

    # The ping waits 0.5 s for an answer: the poll needs no pause of its own.
    wait_for(lambda: app.control.ping(timeout=0.5), timeout_s, "a Celery worker to answer a ping",
             every_s=0)  # fmt: skip


@contextlib.contextmanager
def running_worker(queues: str, name: str, db_url: str) -> Iterator[subprocess.Popen]:
    """A real Celery worker process consuming `queues` (comma-separated), sharing the test
    database (`db_url`: test_database_url()) and Redis; stopped on leaving."""
    env = dict(os.environ, DATABASE_URL=db_url, DJANGO_SETTINGS_MODULE="bms.settings_test")
    log_path = Path(os.environ["BMS_DATA_DIR"]) / "test-worker.log"
    with open(log_path, "ab") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bms", "worker", "-Q", queues,
             "-c", "2", "--without-gossip", "--without-mingle", "-l", "INFO",
             "-n", f"{name}-{os.getpid()}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_worker()
        yield worker
    finally:
        stop_process(worker, timeout_s=15)


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker) -> Iterator[subprocess.Popen]:
    """A real Celery worker process on all queues, sharing the test database and Redis.

    Tests that use it must also use `transactional_db` so what they write is committed
    and visible to the worker. Module-scoped: it is gone before the next module runs, so
    tests elsewhere that inspect the broker's queues find their messages still there.
    """
    with django_db_blocker.unblock():
        db_url = test_database_url()
    with running_worker("ingest,commit,control", "test", db_url) as worker:
        yield worker


@pytest.fixture
def client():
    """Django's test client, except that ingest requests go through bms.wsgi.application, the
    path production uses (tests/wsgi_client.py)."""
    from tests.wsgi_client import WsgiClient

    return WsgiClient()
