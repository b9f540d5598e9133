"""Settings for the processes a fault test starts (web, worker, beat): the test settings, with
Celery's visibility timeout cut from 300 s to a few seconds so that a batch in flight in a
worker killed with SIGKILL is redelivered within the test instead of five minutes later.
Everything else — acks_late, reject-on-worker-lost, retries — is the production setting."""

import os

from bms.settings_test import *  # noqa: F403

CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("BMS_FAULT_VISIBILITY_TIMEOUT", "8")),
    # kombu sweeps for abandoned messages every interval x throttle seconds (100 s by default).
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}

# A killed drain's requests are taken over within seconds: a short lease, beat's safety net
# every second (sensors/ingest/drain.py).
BMS_INGEST_LEASE_S = 2.0
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,  # noqa: F405
    "kick-ingest-drains": {"task": "sensors.tasks.kick_ingest_drains", "schedule": 1.0},
}
