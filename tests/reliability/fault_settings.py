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

# Look for ingest batches the broker lost (sensors/publish.py) every second, 2 s after publishing.
BMS_INGEST_LOST_AFTER_S = 2.0
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,  # noqa: F405
    "requeue-lost-ingest": {"task": "sensors.tasks.requeue_lost_batches", "schedule": 1.0},
}
