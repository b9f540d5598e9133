"""What an anonymous feed read and a failed login cost (second red-team round, #25;
docs/BENCHMARKS.md): CPU seconds of this process per request, in-process through Django's test
client, for

  1. GET /feed/data.json and /api/v1/feeds/data?ids=<9 public feeds>&start=now-199000 s&end=now
     &interval=10, anonymous (refused over BMS_FEED_MAX_POINTS in all) and as a viewer;
  2. POST /user/auth.json and /admin/login/ with a new random username each time, from one
     address, with Django's default (PBKDF2) hasher: before and after the per-address bound.

    REDIS_URL=redis://127.0.0.1:6379/14 .venv/bin/python bench/anonymous_feed_reads.py

Uses bms.settings_test with a scratch SQLite database, a temporary feed directory and the Redis
db of REDIS_URL (flushed). BMS_BENCH_ROOT=<checkout> runs another checkout's code (the figures
"before" were taken so, on main).
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("BMS_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))
from bench.anonymous_cost import cpu_per_call  # noqa: E402  (one CPU-per-call measure)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings_test")

FEEDS = 9
SPAN_S = 199_000
INTERVAL_S = 10


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.hashers import get_hashers
    from django.db import connection
    from django.test.utils import override_settings, setup_test_environment

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0)
    from django.contrib.auth.models import Group, User

    from core.redis import get_redis
    from feeds.models import Feed
    from feeds.store import service
    from tests.wsgi_client import WsgiClient as Client

    get_redis().flushdb()
    settings.BMS_FEED_DIR = Path(tempfile.mkdtemp(prefix="bench-feeds-"))
    settings.BMS_THROTTLE_PUBLIC = None  # the bound itself is measured, not the throttle
    settings.BMS_THROTTLE_API_ANON = None
    now = int(time.time())
    feeds = [Feed.objects.create(name=f"pv-{i}", interval=INTERVAL_S, public=True)
             for i in range(FEEDS)]  # fmt: skip
    times = range(now - SPAN_S, now, INTERVAL_S)
    service.log_points([(f.id, t, float(t % 977)) for f in feeds for t in times])
    service.commit_all(now=now + 60)
    ids = ",".join(str(f.id) for f in feeds)
    window = f"start={(now - SPAN_S) * 1000}&end={now * 1000}&interval={INTERVAL_S}"
    outside = {"REMOTE_ADDR": "192.0.2.10"}
    anonymous = Client()
    viewer = User.objects.create_user("viewer", password="pw-viewer")
    viewer.groups.add(Group.objects.get_or_create(name="viewers")[0])
    staff = Client()
    staff.force_login(viewer)
    for path in ("/feed/data.json", "/api/v1/feeds/data"):
        url = f"{path}?ids={ids}&{window}"
        for who, client in (("anonymous", anonymous), ("viewer", staff)):
            response = client.get(url, **outside)
            cpu = cpu_per_call(lambda c=client, u=url: c.get(u, **outside), 5)
            print(f"{path} {FEEDS} feeds x {SPAN_S // INTERVAL_S} points, {who}: "
                  f"{response.status_code}, {len(response.content) / 1e6:.2f} MB, "
                  f"{cpu * 1000:.1f} ms CPU a request")  # fmt: skip

    # Failed logins with random usernames, Django's default hasher (the test settings use MD5).
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.PBKDF2PasswordHasher"]):
        get_hashers.cache_clear()
        limit = getattr(settings, "BMS_LOGIN_IP_FAILURE_LIMIT", None)
        for path, ok in (("/user/auth.json", 401), ("/admin/login/", 200)):
            get_redis().flushdb()
            from axes.models import AccessAttempt

            AccessAttempt.objects.all().delete()
            ip = {"REMOTE_ADDR": "198.51.100.7"}
            statuses: list[int] = []

            def attempt(p: str = path, ip: dict = ip, statuses: list = statuses) -> None:
                form = {"username": secrets.token_hex(6), "password": "x"}
                statuses.append(Client().post(p, form, **ip).status_code)

            first = cpu_per_call(attempt, limit or 30)
            later = cpu_per_call(attempt, 30)
            refused_from = statuses.index(429) + 1 if 429 in statuses else "never"
            print(f"{path} random usernames from one address: the first {limit or 30} "
                  f"{first * 1000:.1f} ms CPU each (answered {ok}), the next 30 "
                  f"{later * 1000:.1f} ms each; the first 429 at attempt {refused_from}")  # fmt: skip
    get_redis().flushdb()


if __name__ == "__main__":
    main()
