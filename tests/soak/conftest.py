"""The soak fault tests use the fixtures of tests/reliability (private Redis, site of processes)."""

from tests.reliability.conftest import db_proxy, fault_site, private_redis  # noqa: F401
