"""Settings for the test suite: real Redis and database, isolated from a running site.

Set before the base settings load so that subprocesses (a real Celery worker) inherit
the same environment: Redis database 15 unless REDIS_URL is given, a fresh data dir.
"""

import os
import tempfile

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("BMS_DATA_DIR", tempfile.mkdtemp(prefix="bms-test-"))


# Under pytest-xdist (scripts/run-tests.sh runs the suite on several worker processes) each
# worker gets its own Redis db and data dir (feed files, the SQLite test database): the
# processes share nothing but the servers. Done once per worker: the processes a test starts
# inherit the marker and keep the environment the test gave them.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and os.environ.get("BMS_TEST_WORKER") != _WORKER:
    os.environ["BMS_TEST_WORKER"] = _WORKER
    os.environ["BMS_DATA_DIR"] = tempfile.mkdtemp(prefix=f"bms-test-{_WORKER}-")
    # One db below the given one per worker (15, 14, ...; upwards if that would go below 0).
    _head, _, _db = os.environ["REDIS_URL"].rpartition("/")
    _base, _index = (int(_db) if _db.isdigit() else 0), int(_WORKER[2:])
    _db = _base - _index if _base - _index >= 0 else _base + _index
    os.environ["REDIS_URL"] = f"{_head}/{_db}"
os.environ.setdefault("BMS_WATCHDOG_WATCH_BEAT", "false")  # no beat in test runs
# Every commit syncs, so a test that commits finds its points on disk and out of Redis; the
# deferred sync has its own tests (tests/feeds/test_deferred_sync.py).
os.environ.setdefault("BMS_FEED_SYNC_INTERVAL", "0")
# A beat started after one was killed gets RedBeat's lock within seconds, not 20 (bms/settings.py).
os.environ.setdefault("BMS_BEAT_MAX_LOOP_S", "1")
os.environ.setdefault("BMS_BEAT_LOCK_TIMEOUT", "3")
# Alarms are judged at once: tests (and the workers they start) begin right after a start.
os.environ.setdefault("BMS_ALARM_STARTUP_GRACE", "0")

from bms.settings import *  # noqa: E402, F403  (after the environment above is set)
from bms.settings import BMS_DATA_DIR, DATABASES  # noqa: E402

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
