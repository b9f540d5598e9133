"""Settings for the multi-host test's processes (tests/reliability/test_multihost.py): the fault
settings (short visibility timeout, drain kicks every second), reached through Sentinel."""

from tests.reliability.fault_settings import *  # noqa: F403

# The fault settings' transport options replace the base ones: name the Sentinel master again.
if REDIS_SENTINELS:  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS["master_name"] = REDIS_SENTINEL_MASTER  # noqa: F405
