"""Fixtures for the fault tests: a private redis-server and a whole site of real processes."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import test_database_url
from tests.reliability.harness import PrivateRedis, Site


@pytest.fixture
def private_redis():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the fault tests start their own")
    server = PrivateRedis(appendonly=True)
    server.start()
    yield server
    server.close()


@pytest.fixture
def fault_site(transactional_db, private_redis, tmp_path, settings):
    """Web + workers + beat on the test database and the private Redis (started by the test).

    A data dir of its own: feed ids restart after each test's flush, and files left by an
    earlier test under the same id would mix with this one's."""
    data_dir = tmp_path / "data"
    (data_dir / "feeds").mkdir(parents=True)
    settings.BMS_DATA_DIR = data_dir
    settings.BMS_FEED_DIR = data_dir / "feeds"
    site = Site(
        redis=private_redis,
        database_url=test_database_url(),
        log_dir=tmp_path,
        extra_env={"BMS_DATA_DIR": str(data_dir)},
    )
    yield site
    site.close()
