"""Fault settings for the highly available beat test: beat's only entry is a probe task every
BMS_PROBE_EVERY_S seconds (tests/reliability/beat_probe.py), so the ticks can be counted."""

import os

from tests.reliability.fault_settings import *  # noqa: F403

CELERY_IMPORTS = ["tests.reliability.beat_probe"]
CELERY_BEAT_SCHEDULE = {
    "probe": {
        "task": "tests.reliability.beat_probe.probe",
        "schedule": float(os.environ.get("BMS_PROBE_EVERY_S", "3")),
    }
}

# Through Sentinel (tests/reliability/test_redis_sentinel.py): the fault settings' transport
# options replace the base ones, so the master's name is given again.
if REDIS_SENTINELS:  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS["master_name"] = REDIS_SENTINEL_MASTER  # noqa: F405
