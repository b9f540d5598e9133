"""Fixtures for the fault tests: a private redis-server and a whole site of real processes."""

from __future__ import annotations

import shutil

import pytest
from django.db import connection

from tests.conftest import test_database_url
from tests.reliability.harness import PrivateRedis, Site
from tests.reliability.tcp_proxy import TcpProxy


@pytest.fixture
def private_redis():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the fault tests start their own")
    server = PrivateRedis(appendonly=True)
    server.start()
    yield server
    server.close()


@pytest.fixture
def db_proxy(transactional_db):
    """On PostgreSQL, a TCP proxy to the test database the site's processes connect through, so
    a test can cut the database away from them (tcp_proxy.py). None on SQLite (a file)."""
    if connection.vendor != "postgresql":
        yield None
        return
    s = connection.settings_dict
    proxy = TcpProxy(s["HOST"] or "127.0.0.1", int(s["PORT"] or 5432))
    yield proxy
    proxy.close()


def site_database_url(proxy: TcpProxy | None) -> str:
    """The test database as the site's processes see it: through the proxy on PostgreSQL, with
    a connect timeout so that no process waits long on a database it cannot reach."""
    url = test_database_url()
    if proxy is None:
        return url
    head, _, tail = url.rpartition("@")
    _, _, name = tail.partition("/")
    return f"{head}@127.0.0.1:{proxy.port}/{name}?connect_timeout=5"


@pytest.fixture
def fault_site(transactional_db, private_redis, db_proxy, tmp_path, settings):
    """Web + workers + beat on the test database and the private Redis (started by the test).

    A data dir of its own: feed ids restart after each test's flush, and files left by an
    earlier test under the same id would mix with this one's."""
    data_dir = tmp_path / "data"
    (data_dir / "feeds").mkdir(parents=True)
    settings.BMS_DATA_DIR = data_dir
    settings.BMS_FEED_DIR = data_dir / "feeds"
    site = Site(
        redis=private_redis,
        database_url=site_database_url(db_proxy),
        log_dir=tmp_path,
        extra_env={"BMS_DATA_DIR": str(data_dir)},
        db_proxy=db_proxy,
    )
    yield site
    site.close()  # before the proxy closes (db_proxy's teardown runs after this one)
