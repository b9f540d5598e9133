"""Open BMS settings, read from the environment (a `.env` file is read if present).

Names and defaults are the operating contract in docs/CONFIGURATION.md:
DATABASE_URL, REDIS_URL, BMS_DATA_DIR, BMS_FEED_COMMIT_INTERVAL, BMS_CONTROL_TICK,
TIME_ZONE, SECRET_KEY, DEBUG, ALLOWED_HOSTS.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from core.dates import DEFAULT_TIME_ZONE
from core.env import (
    env_bool,
    env_choice,
    env_float,
    env_host_port,
    env_int,
    env_ipv4_interface,
    env_list,
    env_str,
    read_dotenv,
)

BASE_DIR = Path(__file__).resolve().parent.parent
read_dotenv(BASE_DIR / ".env")

DEBUG = env_bool("DEBUG", False)
_INSECURE_DEV_KEY = "insecure-dev-key-set-SECRET_KEY-in-production"
SECRET_KEY = env_str("SECRET_KEY", _INSECURE_DEV_KEY)
if not SECRET_KEY.strip():
    # Django only complains when a request first signs something: every page a 500. Refuse to
    # start instead; a developer with DEBUG on gets the dev key as if it were unset.
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is empty: set it, or leave it unset with DEBUG=true")
    SECRET_KEY = _INSECURE_DEV_KEY
if SECRET_KEY == _INSECURE_DEV_KEY and not DEBUG and env_bool("BMS_PRODUCTION", False):
    raise ImproperlyConfigured("SECRET_KEY must be set when BMS_PRODUCTION is true")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Where feeds (PHPFina files) and the default SQLite database live.
BMS_DATA_DIR = Path(env_str("BMS_DATA_DIR", str(BASE_DIR / "var")))
if not BMS_DATA_DIR.is_absolute():
    BMS_DATA_DIR = BASE_DIR / BMS_DATA_DIR
BMS_FEED_DIR = BMS_DATA_DIR / "feeds"
# Sharded feed writers (docs/DEPLOYMENT.md "Scale-out"): feed_id % N picks a feed's commit queue,
# its writer's lock and its directory. 1 = one writer, files directly in BMS_FEED_DIR. Change it
# only with `manage.py reshard_feeds --to N` (it moves the files). The directories, one per
# shard (relative ones under BMS_FEED_DIR), default to BMS_FEED_DIR/shard-<k>.
BMS_FEED_SHARDS = env_int("BMS_FEED_SHARDS", 1, minimum=1)
if BMS_FEED_SHARDS > 64:
    raise ImproperlyConfigured(f"BMS_FEED_SHARDS={BMS_FEED_SHARDS} must be at most 64")
BMS_FEED_SHARD_DIRS = env_list("BMS_FEED_SHARD_DIRS", [])
if BMS_FEED_SHARD_DIRS and len(BMS_FEED_SHARD_DIRS) != BMS_FEED_SHARDS:
    raise ImproperlyConfigured(
        f"BMS_FEED_SHARD_DIRS names {len(BMS_FEED_SHARD_DIRS)} directories for "
        f"BMS_FEED_SHARDS={BMS_FEED_SHARDS}: give one per shard"
    )
BMS_FEED_COMMIT_INTERVAL = env_int("BMS_FEED_COMMIT_INTERVAL", 60, minimum=1)
# fsync the feed files (and only then release their points from Redis) at most this often; a
# commit in between only writes. 0 = every commit syncs. See docs/FEEDS.md "Write buffer".
BMS_FEED_SYNC_INTERVAL = env_int("BMS_FEED_SYNC_INTERVAL", 60, minimum=0)
# How a sync makes the written files durable: one syncfs of their filesystem per batch of up to
# 2,000 feeds ("filesystem"), or an fsync per file ("file": for a feed directory on a disk shared
# with busy writers, whose dirty pages a syncfs would flush too). feeds/store/disk_sync.py
BMS_FEED_SYNC_BY = env_choice("BMS_FEED_SYNC_BY", "filesystem", ("filesystem", "file"))
# The commit runs this many nice steps below the worker (its own thread): the ingest drain and
# the web come first when the cores are all in use. 0 = as the worker. feeds/store/low_priority.py
BMS_FEED_COMMIT_NICE = env_int("BMS_FEED_COMMIT_NICE", 10, minimum=0, maximum=19)
BMS_CONTROL_TICK = env_int("BMS_CONTROL_TICK", 30, minimum=1)
# The control tick's lock is a lease renewed while a tick runs (control/runner.py): when the
# host running a tick dies, another control worker ticks after at most lease + one tick. No
# longer than the tick keeps that within two ticks; 2 s at least, so a renewal (every third
# of it) has time to land.
BMS_CONTROL_LOCK_LEASE_S = env_int(
    "BMS_CONTROL_LOCK_LEASE_S", max(2, min(10, BMS_CONTROL_TICK)), minimum=2
)
# Relays: re-assert every state this often; per-request timeout, per-board deadline, attempts.
BMS_CONTROL_KEEPALIVE = env_int("BMS_CONTROL_KEEPALIVE", 600, minimum=10)
BMS_CONTROL_DEVICE_TIMEOUT = env_float("BMS_CONTROL_DEVICE_TIMEOUT", 1.0, minimum=0.1)
BMS_CONTROL_DEVICE_DEADLINE = env_float("BMS_CONTROL_DEVICE_DEADLINE", 3.0, minimum=0.5)
BMS_CONTROL_DEVICE_ATTEMPTS = env_int("BMS_CONTROL_DEVICE_ATTEMPTS", 3, minimum=1)
BMS_CONTROL_NODE_ACK_TIMEOUT = env_int("BMS_CONTROL_NODE_ACK_TIMEOUT", 300, minimum=10)
# A zone whose sensor is lost heats this share (%) of each fallback period while occupied.
# Out-of-range values are held to their bounds, not refused, as they always were: the period to
# 2-120 min (shorter short-cycles the valve, longer leaves the room cold for hours at low duty).
BMS_CONTROL_FALLBACK_DUTY = min(100.0, max(0.0, env_float("BMS_CONTROL_FALLBACK_DUTY", 50.0)))
BMS_CONTROL_FALLBACK_PERIOD = min(7200, max(120, env_int("BMS_CONTROL_FALLBACK_PERIOD", 1200)))
# Switching band (K) of the limits that have none of their own (zone over-temperature, plant
# frost from the outside temperature): a limit trips at its value and releases this far past it.
BMS_CONTROL_LIMIT_BAND = min(10.0, max(0.1, env_float("BMS_CONTROL_LIMIT_BAND", 1.0)))
# Modbus meters over TCP: seconds per request, and retries of an unanswered one (an RS-485 bus
# has its own timeout); each meter's poll is bounded as a whole (sensors/devices/modbus_meters.py).
BMS_MODBUS_TIMEOUT_S = env_float("BMS_MODBUS_TIMEOUT_S", 2.0, minimum=0.1)
BMS_MODBUS_RETRIES = env_int("BMS_MODBUS_RETRIES", 1, minimum=0)
# BACnet/IP (docs/BACNET.md): our interface address with its prefix ("192.168.1.20/24": the
# prefix gives the broadcast address of discovery), the port discovery listens on, our client's
# device instance, and the bound of one controller's poll (each answer has the device's timeout).
BMS_BACNET_ADDRESS = env_ipv4_interface("BMS_BACNET_ADDRESS", "0.0.0.0")
BMS_BACNET_PORT = env_int("BMS_BACNET_PORT", 47808, minimum=1, maximum=65535)
BMS_BACNET_INSTANCE = env_int("BMS_BACNET_INSTANCE", 4194000, minimum=0, maximum=4194302)
BMS_BACNET_POLL_DEADLINE_S = env_float(
    "BMS_BACNET_POLL_DEADLINE_S", 20.0, minimum=1.0, maximum=45.0
)
# A routed site: discovery registers with this BBMD ("host[:port]") as a foreign device for the
# time-to-live (10-3600 s; renewed while it listens) so its Who-Is reaches the controllers'
# network and their I-Am reach us. Polls, commands and COV are unicast and need none of it.
BMS_BACNET_BBMD = env_host_port("BMS_BACNET_BBMD", "")
BMS_BACNET_BBMD_TTL_S = env_int("BMS_BACNET_BBMD_TTL_S", 60, minimum=10, maximum=3600)
# COV subscriptions (`manage.py bacnet_cov`, sensors/devices/bacnet_cov_service.py): each
# subscription's lifetime at the controller (renewed at two thirds of it; a forgotten one ends
# by itself), how many points of one controller are subscribed (0: none, the rest polled), and
# the least time between two recorded readings of one point (notifications between are dropped
# and counted, the latest kept). Its own port: 0, any free one (notifications come back to it).
BMS_BACNET_COV_LIFETIME_S = env_int("BMS_BACNET_COV_LIFETIME_S", 300, minimum=5, maximum=3600)
BMS_BACNET_COV_MAX_PER_DEVICE = env_int("BMS_BACNET_COV_MAX_PER_DEVICE", 50, minimum=0, maximum=200)
BMS_BACNET_COV_MIN_INTERVAL_S = env_float(
    "BMS_BACNET_COV_MIN_INTERVAL_S", 1.0, minimum=0.1, maximum=60.0
)
BMS_BACNET_COV_PORT = env_int("BMS_BACNET_COV_PORT", 0, minimum=0, maximum=65535)
# The site as a BACnet device (control/bacnet_server.py, `manage.py bacnet_server`): off unless
# enabled; it listens on BMS_BACNET_ADDRESS at its own port (discovery binds BMS_BACNET_PORT).
BMS_BACNET_SERVER_ENABLED = env_bool("BMS_BACNET_SERVER_ENABLED", False)
BMS_BACNET_SERVER_PORT = env_int("BMS_BACNET_SERVER_PORT", 47809, minimum=1, maximum=65535)
BMS_BACNET_SERVER_INSTANCE = env_int(
    "BMS_BACNET_SERVER_INSTANCE", 4194001, minimum=0, maximum=4194302
)
BMS_BACNET_SERVER_NAME = env_str("BMS_BACNET_SERVER_NAME", "Open BMS site")
if not 1 <= len(BMS_BACNET_SERVER_NAME) <= 64:
    raise ImproperlyConfigured("BMS_BACNET_SERVER_NAME must be 1-64 characters (a device name)")
BMS_BACNET_SERVER_REFRESH_S = env_float(
    "BMS_BACNET_SERVER_REFRESH_S", 10.0, minimum=2.0, maximum=300.0
)
# Per sender (an address: BACnet has no login), so one chatty or hostile head-end cannot starve
# the others: its share of the server's 200 COV subscriptions, and the WriteProperty requests
# it may send in any minute (more: device-busy). Both logged with the address when refused.
BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER = env_int(
    "BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER", 50, minimum=1, maximum=200
)
BMS_BACNET_SERVER_WRITES_PER_MINUTE = env_int(
    "BMS_BACNET_SERVER_WRITES_PER_MINUTE", 10, minimum=1, maximum=600
)
# How long a setpoint or occupancy written from the BACnet network holds (an override that
# ends by itself: a head-end that wrote once and forgot must not hold the zone for ever).
BMS_BACNET_WRITE_HOLD_MIN = env_int("BMS_BACNET_WRITE_HOLD_MIN", 120, minimum=5, maximum=24 * 60)
# iCal feeds and bookings (docs/CONTROL.md). Feeds are fetched only from public addresses,
# unless named here (host names, addresses or networks: a calendar server on the LAN).
BMS_ICAL_ALLOWED_HOSTS = env_list("BMS_ICAL_ALLOWED_HOSTS", [])
BMS_ICAL_MAX_BYTES = env_int("BMS_ICAL_MAX_BYTES", 1024 * 1024, minimum=1024)
BMS_ICAL_TIMEOUT_S = env_float("BMS_ICAL_TIMEOUT_S", 10.0, minimum=0.5)
BMS_ICAL_MAX_EVENTS = env_int("BMS_ICAL_MAX_EVENTS", 500, minimum=1)
BMS_ICAL_MAX_OCCURRENCES = env_int("BMS_ICAL_MAX_OCCURRENCES", 2000, minimum=1)
BMS_BOOKING_MAX_DAYS = env_float("BMS_BOOKING_MAX_DAYS", 14.0, minimum=0.01)
# Largest number of points one feed read may return (emoncms refuses > 8928 by default).
BMS_FEED_MAX_POINTS = env_int("BMS_FEED_MAX_POINTS", 20000, minimum=10)
# Most rows one emoncms CSV export (/feed/csvexport.json, csv=1) may stream, all feeds together:
# about 10 MB (emoncms's own page stops downloads at 25 MB).
BMS_FEED_MAX_CSV_ROWS = env_int("BMS_FEED_MAX_CSV_ROWS", 500_000, minimum=100)
# Padding bounds of the feed store (docs/FEEDS.md). Optional age bound: with a value, a point may
# not start a new feed, or move a feed's start, more than this many days before now. Off (0) by
# default: history is accepted as emoncms accepts it, and what it costs on disk is bounded per
# site by its history budget (BMS_SITE_HISTORY_BUDGET_MB below, issue #26); an age bound refused
# it only at commit, after the sender was answered `ok`. One commit pads at most this many slots.
BMS_FEED_MAX_BACKFILL_DAYS = env_int("BMS_FEED_MAX_BACKFILL_DAYS", 0, minimum=0)
# emoncms's own bound is the most (feeds/store/phpfina.py MAX_PADDING_SLOTS): larger values are cut.
BMS_FEED_MAX_GAP_SLOTS = env_int("BMS_FEED_MAX_GAP_SLOTS", 15_768_000, minimum=1)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",  # staff API tokens: stored hashed, with an expiry (core/authentication.py)
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",  # login lockout (core/login_lockout.py); before bms, whose admin.py amends its admin
    "core",
    "bms",
    "feeds",
    "alarms",
    "sensors",
    "control",
    "energy",
    "findings",
    "displays",
    "demo",
    "staff",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.nul_bytes.RefuseNulBytesMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "bms.urls"
WSGI_APPLICATION = "bms.wsgi.application"
ASGI_APPLICATION = "bms.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # Dates written one way on every page: {{ x|when }}, {{ x|day }} (core/dates.py).
            "builtins": ["core.templatetags.dates"],
        },
    },
]


def _database_config(url: str) -> dict:
    config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        name = Path(config["NAME"])
        if not name.is_absolute():
            config["NAME"] = str(BASE_DIR / name)
        Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # Web, worker and beat share one SQLite file: wait for locks instead of failing.
        # IMMEDIATE: a transaction takes the write lock when it begins, so one that reads and
        # then writes (the login lockout's select_for_update) waits its turn instead of failing
        # at once with "database is locked" (a login flood made 58 of 100 logins a 500).
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
        # Connections kept for 60 s, as PostgreSQL's (one per thread; autocommit, so none
        # holds a lock between requests): a new SQLite connection reads the schema again on
        # its first query, and one a request was half of a one-feed /feed/data.json (4.1 ->
        # 1.9 ms of CPU, docs/BENCHMARKS.md). Forked processes never share one: gunicorn's
        # master and bms/worker_group.py close theirs before forking, Celery in each child.
    elif config["ENGINE"] == "django.db.backends.postgresql":
        # No process may wait forever on a database that stopped answering (a dead host, a
        # dropped network): libpq's defaults wait without limit to connect and for minutes on
        # a dead connection. Parameters given in DATABASE_URL's query string win.
        options = config.setdefault("OPTIONS", {})
        for name, value in _POSTGRES_TIMEOUTS.items():
            options.setdefault(name, value)
    return config


# libpq connection parameters (docs/CONFIGURATION.md): give up connecting after 5 s; find a
# silent dead connection by TCP keepalive within ~60 s, and one with unanswered data in 30 s.
_POSTGRES_TIMEOUTS = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


DATABASE_URL = env_str("DATABASE_URL", "sqlite:///var/db.sqlite3")
DATABASES = {"default": _database_config(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
# Redis with replicas and Sentinel (docs/DEPLOYMENT.md "Scale-out"): the Sentinels' host:port
# list and the name they monitor; REDIS_URL still gives the db number. The ingest append waits
# for this many replicas to have a request (at most BMS_REDIS_WAIT_MS) before answering ok, so
# a failover never loses an accepted reading; 0 with a single Redis.
REDIS_SENTINELS = env_list("REDIS_SENTINELS", [])
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER", "bms")
BMS_REDIS_WAIT_REPLICAS = env_int("BMS_REDIS_WAIT_REPLICAS", 0, minimum=0)
BMS_REDIS_WAIT_MS = env_int("BMS_REDIS_WAIT_MS", 1000, minimum=1)
for _sentinel in REDIS_SENTINELS:
    if not re.fullmatch(r"[\w.\-]+:\d{1,5}", _sentinel):
        raise ImproperlyConfigured(f"REDIS_SENTINELS: {_sentinel!r} is not host:port")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("TIME_ZONE", DEFAULT_TIME_ZONE)
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "var" / "static")))
STATICFILES_DIRS = [
    # Chart.js from npm (`npm ci`), served as /static/vendor/chart.js/chart.umd.js: never a CDN.
    ("vendor/chart.js", BASE_DIR / "node_modules" / "chart.js" / "dist"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve from the app directories too when collectstatic has not been run (dev, tests).
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/admin/login/"
LOGIN_REDIRECT_URL = "/staff/"

# --- Login lockout (django-axes; core/login_lockout.py, docs/CONFIGURATION.md) -------------
# Every password check goes through the lockout backend first: after BMS_LOGIN_FAILURE_LIMIT
# wrong passwords for one username from one client IP, that pair is refused (HTTP 429)
# without checking the password until BMS_LOGIN_COOLOFF_MINUTES have passed.
AUTHENTICATION_BACKENDS = [
    "core.login_lockout.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("BMS_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("BMS_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
# ...and after this many wrong logins from one client IP, whatever the usernames, that IP is
# refused the same way (a client cycling usernames never met the per-pair limit; #25).
BMS_LOGIN_IP_FAILURE_LIMIT = env_int("BMS_LOGIN_IP_FAILURE_LIMIT", 30, minimum=1)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a right password clears the count for that username and IP
AXES_CLIENT_IP_CALLABLE = "core.login_lockout.client_ip"  # honours BMS_TRUSTED_PROXIES
AXES_USERNAME_CALLABLE = "core.login_lockout.username_of"
AXES_SENSITIVE_PARAMETERS = ["password"]

# Requests: ingest bodies are bounded here and again per endpoint.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("BMS_MAX_BODY_BYTES", 1_048_576)
# Ingest limits (docs/INGEST.md): rows and values per request, how far ahead a clock may be.
BMS_INGEST_MAX_ROWS = env_int("BMS_INGEST_MAX_ROWS", 2500, minimum=1)
BMS_INGEST_MAX_VALUES = env_int("BMS_INGEST_MAX_VALUES", 50000, minimum=1)
BMS_INGEST_MAX_FUTURE_S = env_int("BMS_INGEST_MAX_FUTURE_S", 900, minimum=0)
# Inputs (a Sensor and a Feed each) created automatically for unseen keys, per node and per
# site: beyond them a new key's readings are skipped and an alarm raised (docs/INGEST.md).
BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = env_int("BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE", 64, minimum=0)
BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE = env_int(
    "BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE", 1000, minimum=0
)
# Nodes a gateway key registers by posting for them (sensors/ingest/registration.py): per site,
# and per request (a request naming more new nodes registers none of them). 32 is every radio id
# one JeeLib/RFM69 group can carry (5 bits), so a real emonhub's first post always fits.
# The bytes a site's history may add to its feed files (sensors/ingest/history_budget.py), unless
# the site sets its own (Site.history_budget_mb): 2 GiB is about 170 feed-years of 10 s slots,
# e.g. a year of history for every input of a large emonPi site, and it stops one key from
# filling the disk with years of NaN padding (a point in 1990 costs 36 years of slots per feed).
BMS_SITE_HISTORY_BUDGET_MB = env_int("BMS_SITE_HISTORY_BUDGET_MB", 2048, minimum=0)
BMS_INGEST_MAX_AUTO_NODES_PER_SITE = env_int("BMS_INGEST_MAX_AUTO_NODES_PER_SITE", 64, minimum=0)
BMS_INGEST_MAX_NEW_NODES_PER_REQUEST = env_int(
    "BMS_INGEST_MAX_NEW_NODES_PER_REQUEST", 32, minimum=0
)
# A node name refused for a site is answered from Redis, with no database query, for this long;
# at most BMS_INGEST_REFUSED_NAMES names are kept per site (the oldest go first).
BMS_INGEST_REFUSED_NAME_TTL_S = env_int("BMS_INGEST_REFUSED_NAME_TTL_S", 600, minimum=1)
BMS_INGEST_REFUSED_NAMES = env_int("BMS_INGEST_REFUSED_NAMES", 10_000, minimum=1)

# --- Throttling (core/throttle.py, docs/CONFIGURATION.md) ---------------------------------
# Counts live in Redis so every gunicorn worker shares them. Generous defaults: a real site
# posts maybe 50 requests/s in all, bench/ingest.py several hundred/s from one node.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "bms-cache",
        # A Redis that does not answer must not hang a request (DRF throttles read the cache).
        "OPTIONS": {"socket_timeout": 5, "socket_connect_timeout": 5},
    }
}


def _throttle_rate(name: str, default: str) -> str | None:
    """`<count>/<second|minute|hour|day>`, or off; a typo stops the program at start."""
    value = env_str(name, default).strip().lower()
    if value in ("", "off", "none", "0"):
        return None
    if not re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name}={value!r}: use e.g. 6000/minute, 100/second or off")
    return value


# Ingest per node, counted once its key matched: an emonTx posts every 10 s (6/min), an emonhub
# gateway a batch every few seconds; 600/min (10/s) leaves 100x headroom for a catch-up after an
# outage, yet one node cannot fill the shared ingest queue (docs/INGEST.md#limits-and-throttles).
BMS_THROTTLE_INGEST = _throttle_rate("BMS_THROTTLE_INGEST", "600/minute")
# Ingest requests with a missing or wrong key, per client address.
BMS_THROTTLE_INGEST_FAILED = _throttle_rate("BMS_THROTTLE_INGEST_FAILED", "120/minute")
BMS_THROTTLE_PUBLIC = _throttle_rate("BMS_THROTTLE_PUBLIC", "3000/minute")  # kiosk, feed: per IP
BMS_THROTTLE_API_ANON = _throttle_rate("BMS_THROTTLE_API_ANON", "1200/minute")  # /api/: per IP
BMS_THROTTLE_API_USER = _throttle_rate("BMS_THROTTLE_API_USER", "12000/minute")  # /api/: per user
# Reverse proxies in front of the site whose X-Forwarded-For is trusted for the client IP.
BMS_TRUSTED_PROXIES = env_int("BMS_TRUSTED_PROXIES", 0, minimum=0)

REST_FRAMEWORK = {
    # Token first so an unauthenticated request gets 401 with WWW-Authenticate, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.authentication.TokenAuth",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.permissions.GroupPermission"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "core.api_errors.json_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "core.throttle.AnonRateThrottle",
        "core.throttle.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"anon": BMS_THROTTLE_API_ANON, "user": BMS_THROTTLE_API_USER},
    # 0, not None: None makes DRF count by the client's own X-Forwarded-For (core/throttle.py).
    "NUM_PROXIES": BMS_TRUSTED_PROXIES,
    # JSON that nests too deep is a 400, never a 500 (core/parsers.py); too big a 413.
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
# Deepest JSON nesting a DRF write may send (real bodies: 3, a sensor's process list).
BMS_JSON_MAX_DEPTH = env_int("BMS_JSON_MAX_DEPTH", 32, minimum=2)

# Staff API tokens (django-rest-knox): only a SHA-512 hash is stored; each expires.
BMS_API_TOKEN_TTL_DAYS = env_int("BMS_API_TOKEN_TTL_DAYS", 90, minimum=1)
BMS_API_TOKENS_PER_USER = env_int("BMS_API_TOKENS_PER_USER", 10, minimum=1)
REST_KNOX = {"TOKEN_TTL": timedelta(days=BMS_API_TOKEN_TTL_DAYS), "AUTO_REFRESH": False}

SPECTACULAR_SETTINGS = {
    "TITLE": "Open BMS API",
    "DESCRIPTION": "Building management: sites, nodes, sensors, feeds, zones, bookings, displays. "
    "Roles and authentication: docs/API.md; node ingest: docs/INGEST.md.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files (sidecar), never a CDN: sites may be offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Plain Django views (ingest, node commands) documented by each app, and tag descriptions:
    # core/openapi.py. Tags are set per operation, so no path prefix is needed to group them.
    "PREPROCESSING_HOOKS": ["core.openapi.add_plain_views"],
    "POSTPROCESSING_HOOKS": ["core.openapi.describe_schema"],
}

# --- MQTT ingest (manage.py bms_mqtt, sensors/devices/mqtt_auth.py, docs/GATEWAYS.md) ---------------
# Defaults of the command's options. The password may come from BMS_MQTT_PASSWORD_FILE.
BMS_MQTT_HOST = env_str("BMS_MQTT_HOST", "127.0.0.1")
BMS_MQTT_PORT = env_int("BMS_MQTT_PORT", 0, minimum=0)  # 0: 8883 with TLS, else 1883
BMS_MQTT_USERNAME = env_str("BMS_MQTT_USERNAME", "")
BMS_MQTT_PASSWORD = env_str("BMS_MQTT_PASSWORD", "")
BMS_MQTT_TLS = env_bool("BMS_MQTT_TLS", False)
BMS_MQTT_CA_FILE = env_str("BMS_MQTT_CA_FILE", "")  # empty: the system's CA certificates
BMS_MQTT_CERT_FILE = env_str("BMS_MQTT_CERT_FILE", "")  # client certificate, if the broker asks
BMS_MQTT_KEY_FILE = env_str("BMS_MQTT_KEY_FILE", "")

# --- Celery -----------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None  # results are never read; skip the round trip
CELERY_TASK_IGNORE_RESULT = True
# JSON only: tasks take ids and plain data, never pickled model instances.
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
# No task may hang a worker: hard limit kills it, soft limit lets it clean up first.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("BMS_TASK_SOFT_TIME_LIMIT", 50)
CELERY_TASK_TIME_LIMIT = env_int("BMS_TASK_TIME_LIMIT", 60)
# Take one message at a time so a burst of ingest cannot sit prefetched ahead of others.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker killed mid-task must not lose a batch: redeliver it (ingest is idempotent).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 300,
    # kombu waits forever by default on a broker that stopped answering without closing the
    # connection (a hung Redis, a dropped link): a publish from beat, an ack from a worker.
    # As core.redis: give up after 5 s, and the caller's retry or Celery's reconnect takes over.
    "socket_timeout": 5,
    "socket_connect_timeout": 5,
}
# Through Sentinel (REDIS_SENTINELS): kombu's sentinel transport and RedBeat's sentinel client
# find the current primary themselves, unless CELERY_BROKER_URL names another broker.
_REDIS_DB = int(REDIS_URL.rsplit("/", 1)[-1]) if REDIS_URL.rsplit("/", 1)[-1].isdigit() else 0
if REDIS_SENTINELS and "CELERY_BROKER_URL" not in os.environ:
    CELERY_BROKER_URL = ";".join(f"sentinel://{s}/{_REDIS_DB}" for s in REDIS_SENTINELS)
    CELERY_BROKER_TRANSPORT_OPTIONS["master_name"] = REDIS_SENTINEL_MASTER
CELERY_TASK_DEFAULT_QUEUE = "ingest"
# Separate queues so a flood of readings never delays the boiler.
CELERY_TASK_ROUTES = (
    # A shard's commit goes to that shard's queue (feeds/store/routing.py); with one shard, "commit".
    "feeds.store.routing.route_commit",
    {
        "feeds.tasks.*": {"queue": "commit"},
        "sensors.tasks.*": {"queue": "ingest"},
        # The iCal sync fetches and writes for seconds: never on the control worker, where a slow or
        # hostile calendar server would delay the boiler's tick.
        "control.tasks.sync_ical_feeds": {"queue": "commit"},
        "control.tasks.*": {"queue": "control"},
        # SMTP may take its EMAIL_TIMEOUT: never on the control worker, where it would delay a tick.
        "alarms.tasks.send_alarm_digest": {"queue": "commit"},
        "alarms.tasks.*": {"queue": "control"},
        "energy.tasks.*": {"queue": "commit"},
        # The rules read a week of history: seconds of work, never on the control worker.
        "findings.tasks.*": {"queue": "commit"},
    },
)
CELERY_BEAT_SCHEDULE = {
    "control-tick": {"task": "control.tasks.control_tick", "schedule": float(BMS_CONTROL_TICK)},
    "check-silent-nodes": {"task": "sensors.tasks.check_silent_nodes", "schedule": 60.0},
    "poll-modbus-meters": {"task": "sensors.tasks.poll_modbus_meters", "schedule": 10.0},
    "poll-bacnet-devices": {"task": "sensors.tasks.poll_bacnet_devices", "schedule": 5.0},
    "sync-ical-bookings": {"task": "control.tasks.sync_ical_feeds", "schedule": 900.0},
    "worker-heartbeat": {"task": "alarms.tasks.heartbeat", "schedule": 15.0},
    "system-watchdog": {"task": "alarms.tasks.system_watchdog", "schedule": 60.0},
    # Alarm e-mail goes out as a digest, off the request and worker paths (alarms/notify.py).
    "alarm-email-digest": {
        "task": "alarms.tasks.send_alarm_digest",
        "schedule": env_float("BMS_ALARM_EMAIL_CHECK_S", 15.0, minimum=1.0),
    },
    # Daily use per meter for the energy page (energy/refresh.py, docs/ENERGY.md).
    "energy-refresh-recent": {"task": "energy.tasks.refresh_recent", "schedule": 900.0},
    # Find the waste: every rule over the last week, hourly (findings/tasks.py, docs/FINDINGS.md).
    "find-waste": {"task": "findings.tasks.find_waste_recent", "schedule": 3600.0},
    # The week's open findings to each site's report recipients, Monday 07:30 (docs/FINDINGS.md).
    "findings-weekly-digest": {
        "task": "findings.tasks.send_weekly_digest",
        "schedule": crontab(minute=30, hour=7, day_of_week=1),
    },
    # Last month's energy report to each building's recipients, 06:10 on the 1st (docs/ENERGY.md).
    "energy-monthly-reports": {
        "task": "energy.tasks.send_monthly_reports",
        "schedule": crontab(minute=10, hour=6, day_of_month=1),
    },
    # The safety net of the web's drain kicks (sensors/ingest/stream.py): a shard with waiting
    # requests and no drain gets one within this long (a drain killed, an outage ended).
    "kick-ingest-drains": {
        "task": "sensors.tasks.kick_ingest_drains",
        "schedule": env_float("BMS_INGEST_KICK_EVERY_S", 2.0, minimum=0.5),
    },
}
# One commit per shard and interval, each routed to its shard's queue (feeds/store/routing.py).
if BMS_FEED_SHARDS == 1:
    CELERY_BEAT_SCHEDULE["commit-feed-buffer"] = {
        "task": "feeds.tasks.commit_buffer",
        "schedule": float(BMS_FEED_COMMIT_INTERVAL),
    }
else:
    for _shard in range(BMS_FEED_SHARDS):
        CELERY_BEAT_SCHEDULE[f"commit-feed-shard-{_shard}"] = {
            "task": "feeds.tasks.commit_buffer",
            "schedule": float(BMS_FEED_COMMIT_INTERVAL),
            "args": [_shard],
        }
# Ingest on Redis Streams (docs/INGEST.md): shards (node id % N) drained one drain at a time
# each; a drain's lease (a killed drain's requests are taken over once it runs out); requests
# per node per pass (fairness); a drain task's time before it hands over to a fresh one; the
# backlog (requests waiting) that raises the ingest-backlog alarm.
BMS_INGEST_SHARDS = env_int("BMS_INGEST_SHARDS", 8, minimum=1)
BMS_INGEST_LEASE_S = env_float("BMS_INGEST_LEASE_S", 5.0, minimum=1.0)
BMS_INGEST_SLICE = env_int("BMS_INGEST_SLICE", 20, minimum=1)
BMS_INGEST_DRAIN_BUDGET_S = env_float("BMS_INGEST_DRAIN_BUDGET_S", 20.0, minimum=1.0)
# An emptied drain waits this long for more before it ends (no Celery message per single post),
# blocked on its shards' bells: a request arriving meanwhile is taken at once (issue #29).
BMS_INGEST_LINGER_S = env_float("BMS_INGEST_LINGER_S", 0.2, minimum=0.0)
# A drain whose pass took this long, or left a node's requests waiting (a full slice), hands
# half its shards to a drain of another worker process (sensors/ingest/drain.py, "Falling
# behind"): one drain gets one process's CPU. 1 s: at 0.1 s (the freshness aim) a loaded
# machine handed over at 30 req/s and the hand-overs' Celery round trips made p99 worse
# (docs/BENCHMARKS.md, "POST -> readable").
BMS_INGEST_BEHIND_S = env_float("BMS_INGEST_BEHIND_S", 1.0, minimum=0.001)
BMS_INGEST_BACKLOG_ALARM = env_int("BMS_INGEST_BACKLOG_ALARM", 20_000, minimum=1)
# /healthz (bms/health.py): anonymous callers get the result of the last check, made at most
# this often per web process; staff and the local monitor get a fresh one. The checks cost
# about a second (the Celery worker ping waits 1 s), which anyone could ask for unthrottled.
BMS_HEALTHZ_CACHE_S = env_float("BMS_HEALTHZ_CACHE_S", 5.0, minimum=0.0)
# beat keeps its schedule state under the data dir, not in the working directory (used only by
# Celery's file scheduler, BMS_BEAT_SCHEDULER=celery.beat:PersistentScheduler).
CELERY_BEAT_SCHEDULE_FILENAME = str(BMS_DATA_DIR / "celerybeat-schedule")
# A clock that survives its host (docs/RELIABILITY.md "Scale-out"): RedBeat keeps
# each entry's last run in Redis and lets one beat at a time hold its lock, so two or more
# beats may run (on two hosts): the active one sends every tick once; a standby retries the
# lock every BMS_BEAT_MAX_LOOP_S and takes over when the active's lock runs out
# (BMS_BEAT_LOCK_TIMEOUT after it died): within lock + loop, under two control ticks.
CELERY_BEAT_SCHEDULER = env_str(
    "BMS_BEAT_SCHEDULER", "bms.beat_scheduler:ResilientRedBeatScheduler"
)
CELERY_BEAT_MAX_LOOP_INTERVAL = env_int("BMS_BEAT_MAX_LOOP_S", 5, minimum=1)
CELERY_REDBEAT_LOCK_TIMEOUT = env_int(
    "BMS_BEAT_LOCK_TIMEOUT", 3 * CELERY_BEAT_MAX_LOOP_INTERVAL, minimum=1
)
if CELERY_REDBEAT_LOCK_TIMEOUT <= CELERY_BEAT_MAX_LOOP_INTERVAL:
    # The active beat renews its lock once a loop: a shorter lock would lapse between two.
    raise ImproperlyConfigured("BMS_BEAT_LOCK_TIMEOUT must be longer than BMS_BEAT_MAX_LOOP_S")
CELERY_REDBEAT_REDIS_URL = REDIS_URL
CELERY_REDBEAT_KEY_PREFIX = "bms:redbeat:"
CELERY_REDBEAT_REDIS_OPTIONS = {"socket_timeout": 5, "socket_connect_timeout": 5}
if REDIS_SENTINELS:
    CELERY_REDBEAT_REDIS_URL = f"redis-sentinel://{REDIS_SENTINELS[0]}/{_REDIS_DB}"
    CELERY_REDBEAT_REDIS_OPTIONS = {
        "sentinels": [(h, int(p)) for h, _, p in (s.rpartition(":") for s in REDIS_SENTINELS)],
        "service_name": REDIS_SENTINEL_MASTER,
        "db": _REDIS_DB,
        "socket_timeout": 5,
        "retry_period": 60,  # RedBeat retries a lost primary this long (a failover) before failing
    }

# --- Email (alarms) -----------------------------------------------------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
# An unreachable mail server must not hold up the task that raised the alarm.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "bms@localhost")
# The site's address as people reach it (e.g. https://bms.example.org): links in e-mails (the
# weekly findings digest) start with it; empty, they are paths.
BMS_SITE_URL = env_str("BMS_SITE_URL", "")
BMS_ALARM_EMAILS = env_list("BMS_ALARM_EMAILS", [])
# At most one alarm e-mail (a digest of everything raised meanwhile) per this many seconds.
BMS_ALARM_EMAIL_EVERY_S = env_int("BMS_ALARM_EMAIL_EVERY_S", 60, minimum=1)
# System watchdog thresholds (alarms/watchdog.py, docs/RELIABILITY.md).
BMS_ALARM_DISK_FREE_PCT = env_float("BMS_ALARM_DISK_FREE_PCT", 10.0, minimum=0.0)
BMS_ALARM_BACKLOG_POINTS = env_int("BMS_ALARM_BACKLOG_POINTS", 2_000_000, minimum=1)
# Points leave Redis only at a sync, so the head of a buffer may rightly wait a whole cycle.
BMS_ALARM_BACKLOG_AGE_S = env_int(
    "BMS_ALARM_BACKLOG_AGE_S", 3 * max(BMS_FEED_COMMIT_INTERVAL, BMS_FEED_SYNC_INTERVAL), minimum=1
)
BMS_ALARM_BEAT_STALE_S = env_int("BMS_ALARM_BEAT_STALE_S", 120, minimum=30)
# After a worker starts, nodes and relays are judged only after this many seconds (nodes: at
# least 3 of their intervals), so a restart does not raise an alarm per device (ALARMS.md).
BMS_ALARM_STARTUP_GRACE = env_int("BMS_ALARM_STARTUP_GRACE", 120, minimum=0)
# Live staff pages (overview, plant status) update their data in place this often (core/live.py).
BMS_STAFF_LIVE_S = env_int("BMS_STAFF_LIVE_S", 60, minimum=1)
# The control worker watches beat from a thread; test runs have no beat, so they turn it off.
BMS_WATCHDOG_WATCH_BEAT = env_bool("BMS_WATCHDOG_WATCH_BEAT", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Node keys travel in query strings: mask `apikey=`, `token=` ... values (core/log_scrub.py).
    "filters": {
        "scrub": {"()": "core.log_scrub.ScrubSecretsFilter"},
        # A refused permission is a line, not a traceback (core/log_denied.py).
        "denied": {"()": "core.log_denied.PermissionDeniedOneLine"},
        # Libraries that log a line per packet a peer sends, bounded a minute (core/log_budget.py).
        "library_budget": {"()": "core.log_budget.LibraryLineBudget"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["scrub", "denied", "library_budget"],
        },
        # runserver's request lines (Django's own handler, plus the filter).
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["scrub"],
        },
    },
    "loggers": {
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- Production hardening (BMS_PRODUCTION=true) ---------------------------------
if env_bool("BMS_PRODUCTION", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

os.makedirs(BMS_FEED_DIR, exist_ok=True)
os.makedirs(STATIC_ROOT, exist_ok=True)  # whitenoise warns on a missing root
