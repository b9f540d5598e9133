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
def fault_site(transactional_db, private_redis, tmp_path):
    """Web + workers + beat on the test database and the private Redis (started by the test)."""
    site = Site(redis=private_redis, database_url=test_database_url(), log_dir=tmp_path)
    yield site
    site.close()
