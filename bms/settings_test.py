"""Settings for the test suite: real Redis and database, isolated from a running site.

Set before the base settings load so that subprocesses (a real Celery worker) inherit
the same environment: Redis database 15 unless REDIS_URL is given, a fresh data dir.
"""

import os
import tempfile

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("BMS_DATA_DIR", tempfile.mkdtemp(prefix="bms-test-"))
os.environ.setdefault("BMS_WATCHDOG_WATCH_BEAT", "false")  # no beat in test runs
# Every commit syncs, so a test that commits finds its points on disk and out of Redis; the
# deferred sync has its own tests (tests/feeds/test_deferred_sync.py).
os.environ.setdefault("BMS_FEED_SYNC_INTERVAL", "0")
# Alarms are judged at once: tests (and the workers they start) begin right after a start.
os.environ.setdefault("BMS_ALARM_STARTUP_GRACE", "0")

from bms.settings import *  # noqa: F403
from bms.settings import BMS_DATA_DIR, DATABASES

# The test database must be a file (not :memory:) so a real worker process can share it.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(BMS_DATA_DIR / "test_db.sqlite3")}
    # The site begins SQLite transactions IMMEDIATE (bms/settings.py). pytest-django wraps each
    # `db` test in one transaction: IMMEDIATE, it would hold the write lock for the whole test
    # against the processes the test starts (the docs harness runs manage.py commands).
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "DEFERRED"
elif os.environ.get("BMS_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["BMS_TEST_DB_NAME"]}
# Fast hashing: the suite creates many users.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
