"""/healthz: is every part the site needs alive? 200 when all are, 503 when one is not.

Anyone sees ok/fail per part; the details (errors, paths, worker names) only staff.

The worker check asks every worker which queues it consumes, in one broadcast that waits
WORKER_INSPECT_TIMEOUT_S for replies, and fails when a queue that must have a worker has none
(control first: alarms/watchdog.py `unserved_queues`, the watchdog's own answer); the control
tick check fails when the last tick recorded in Redis (control/runtime.py) is older than three
ticks and a grace. So the checks cost the server about a second, and /healthz is public:
anonymous callers are answered from the last result of this process, checked again at most
every BMS_HEALTHZ_CACHE_S seconds, by one thread at a time. Staff and the local monitor (a
request to gunicorn itself from the loopback, not through the proxy: the Docker health check)
get a fresh check, which refreshes that result.
"""

from __future__ import annotations

import ipaddress
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from alarms import watchdog
from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from control import runtime
from core.permissions import has_staff_role
from core.redis import get_redis

# Beat stamps every 10 s; three missed stamps means it is gone.
BEAT_STALE_AFTER_S = 35
WORKER_INSPECT_TIMEOUT_S = 1.0
# A tick may run late (a slow relay board, beat's own jitter): stale after three tick periods
# and this much more.
CONTROL_TICK_GRACE_S = 15.0


def check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"ok": True, "engine": connection.vendor}


def check_redis() -> dict:
    get_redis().ping()
    return {"ok": True}


def check_worker() -> dict:
    """Whether each queue that must have a worker has one (control, ingest, commit, and each
    feed shard's commit-<k>); staff see the queues without one and who consumes the others."""
    consumers = watchdog.queue_consumers(timeout_s=WORKER_INSPECT_TIMEOUT_S)
    if consumers is None:
        return {"ok": False, "error": "cannot ask the workers: the broker is unreachable"}
    missing = watchdog.unserved_queues(consumers)
    return {
        "ok": not missing,
        "no_consumer": missing,
        "consumers": {q: consumers.get(q, []) for q in watchdog.watched_queues()},
        "workers": sorted({w for names in consumers.values() for w in names}),
    }


def check_control_tick(now: float | None = None) -> dict:
    """How long ago the last control tick ran: its report's `at`, saved by every tick as it
    ends (control/runtime.py `save_last_tick`). A control worker that consumes its queue but no
    longer ticks switches no relay either."""
    now = time.time() if now is None else now
    stale_after = 3 * settings.BMS_CONTROL_TICK + CONTROL_TICK_GRACE_S
    last = runtime.load_last_tick()
    if not last or "at" not in last:
        return {"ok": False, "error": "no control tick recorded", "stale_after_s": stale_after}
    age = now - datetime.fromisoformat(last["at"]).timestamp()
    return {
        "ok": age <= stale_after,
        "last_tick_s_ago": round(age, 1),
        "stale_after_s": stale_after,
    }


def check_beat() -> dict:
    stamp = get_redis().get(BEAT_HEARTBEAT_KEY)
    if stamp is None:
        return {"ok": False, "error": "no heartbeat from celery beat"}
    age = time.time() - int(stamp)
    return {"ok": age < BEAT_STALE_AFTER_S, "last_heartbeat_s_ago": round(age, 1)}


def check_ingest() -> dict:
    """Accepted ingest requests not processed yet (sensors/ingest/stream.py); not ok above the
    backlog alarm's bound (BMS_INGEST_BACKLOG_ALARM), where workers are falling behind."""
    from sensors.ingest.drain import backlog

    waiting = sum(backlog().values())
    limit = settings.BMS_INGEST_BACKLOG_ALARM
    return {"ok": waiting <= limit, "waiting": waiting, "alarm_above": limit}


def check_data_dir() -> dict:
    probe = settings.BMS_FEED_DIR / f".healthz-{uuid.uuid4().hex}"
    probe.write_bytes(b"ok")
    probe.unlink()
    return {"ok": True, "path": str(settings.BMS_DATA_DIR)}


CHECKS = {
    "database": check_database,
    "redis": check_redis,
    "worker": check_worker,
    "control_tick": check_control_tick,
    "beat": check_beat,
    "ingest": check_ingest,
    "data_dir": check_data_dir,
}


# Workers, beat and the tick are reached through Redis: with Redis down, asking would only hang.
NEEDS_REDIS = {"worker", "control_tick", "beat", "ingest"}


def run_checks() -> dict[str, dict]:
    results: dict[str, dict] = {}
    for name, check in CHECKS.items():
        if name in NEEDS_REDIS and not results["redis"]["ok"]:
            results[name] = {"ok": False, "error": "unknown: Redis (the broker) is down"}
            continue
        try:
            results[name] = check()
        except Exception as exc:  # any failure of a dependency is the answer, not a 500
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return results


@dataclass(frozen=True)
class _Result:
    checked_at: float  # time.time() of the check
    results: dict[str, dict]


_last: _Result | None = None
_generation = 0  # checks finished by this process: tells a waiting caller one ended meanwhile
_checking = threading.Lock()  # one check at a time per process: a burst waits for it


def forget() -> None:
    """Drop the cached result (tests; a changed setting)."""
    global _last
    _last = None


def _fresh(now: float) -> bool:
    """Whether the cached result may still answer an anonymous caller at `now`. A clock that
    went back counts as stale, so a result is never kept longer than the period."""
    max_age = settings.BMS_HEALTHZ_CACHE_S
    return _last is not None and 0 <= now - _last.checked_at < max_age


def checked(*, deep: bool) -> dict[str, dict]:
    """The checks' results: run now when `deep`, else the cached ones while fresh. Threads
    that find the result stale queue on one lock and the first refreshes it for the rest; deep
    callers waiting on that lock take the result of a check that ended after they asked."""
    global _last, _generation
    seen = _generation
    if not deep and _fresh(time.time()):
        return _last.results  # type: ignore[union-attr]
    with _checking:
        # A check that finished after this request came in answers it too, deep or not: a
        # burst of local or staff requests shares one check instead of queueing a second each.
        if _generation != seen and _last is not None:
            return _last.results
        if not deep and _fresh(time.time()):
            return _last.results  # type: ignore[union-attr]
        results = run_checks()
        _last = _Result(time.time(), results)
        _generation += 1
        return results


def is_local_monitor(request) -> bool:
    """A request from the loopback that did not come through the proxy (nginx always adds
    X-Forwarded-For): the container's own health check, or an operator on the host."""
    if "HTTP_X_FORWARDED_FOR" in request.META:
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _caller(request):
    """The session's user, or the owner of a staff API token (`Authorization: Token ...`,
    core/authentication.py): a monitoring script holding a staff token gets the deep answer
    as a logged-in engineer does (#25: it was answered as anonymous). A token that is wrong
    raises AuthenticationFailed: its holder is told, not quietly given the public answer."""
    if request.user.is_authenticated or "HTTP_AUTHORIZATION" not in request.META:
        return request.user
    from core.authentication import TokenAuth

    found = TokenAuth().authenticate(request)
    return request.user if found is None else found[0]


@never_cache
def healthz(request):
    from rest_framework.exceptions import AuthenticationFailed

    try:
        staff = has_staff_role(_caller(request))
    except AuthenticationFailed as exc:
        return JsonResponse(
            {"success": False, "error": str(exc.detail), "field": "Authorization"}, status=401
        )
    results = checked(deep=staff or is_local_monitor(request))
    healthy = all(r["ok"] for r in results.values())
    if not staff:
        # Host names, paths, worker names and error texts are for staff: a monitor needs only
        # which part is up, and they tell an attacker what to aim at.
        results = {name: {"ok": r["ok"]} for name, r in results.items()}
    return JsonResponse({"ok": healthy, "checks": results}, status=200 if healthy else 503)
