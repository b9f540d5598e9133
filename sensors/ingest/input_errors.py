"""A node's input errors: values left out of a batch that was accepted (`ok`) anyway.

emonhub resends a refused batch forever, so the emoncms endpoints keep a batch's good values
and skip the bad ones (text that is not a number, a row without a usable time or node:
sensors/ingest/emoncms_input.py); the worker adds the readings a stateful input process could
not count (older than one it already processed: sensors/ingest/processing.py). Each skip is
recorded where staff see it:

- Redis hash `sensors:input-errors:<subject>`: `count` (values skipped so far), of them `late`
  (processed late after all), `duplicates` (resent readings passed by: no alarm), `last` (the
  newest skips, named by row, position and reason), `at` (unix seconds). The node admin page,
  the staff inputs page and `GET /api/v1/nodes/<id>/input-errors` show it, each count in its
  own words (`counts`, `counted`).
- An alarm `node-input-errors:<node id>` (or `gateway-input-errors:<gateway key id>` for rows
  that name no usable node) opens on the first skip, on the overview and /staff/ like every
  alarm, and counts the skipped values (`occurrences`) with the newest skips as its message:
  brought up to date at most every SYNC_EVERY_S per subject, so a flood of refused batches
  costs Redis increments, not a database write each. It clears when the subject posts a batch with nothing skipped at least CLEAR_AFTER_S
  after its last skip, so a device that sends a null now and then does not open and close
  (and email) an alarm on every post.

The set of subjects with an open alarm is a Redis sorted set (subject -> last skip time). A
clean batch on the web asks it inside the append's script (DUE_LUA, sensors/ingest/stream.py):
no round trip and no database query of its own; only a subject whose alarm is due to clear
costs more (`close`: a ZREM and the alarm's UPDATE), once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from alarms.lifecycle import clear_alarm, count_alarm
from core.redis import get_redis
from sensors.ingest.emoncms_input import Skipped

log = logging.getLogger(__name__)

OPEN_KEY = "sensors:input-errors:open"
CLEAR_AFTER_S = 3600
SHOWN = 5  # skips named in the record and the alarm
MAX_TEXT = 1000  # characters of the `last` record
MAX_ALARM_TEXT = 1500  # the alarm's message: the counts, the words and `last`
SYNC_EVERY_S = 10  # the alarm's count and message follow the record at most this often


# A subject (whose skipped values are recorded) is named by its alarm's key: one name for both.
def node_subject(node_pk: int) -> str:
    return f"node-input-errors:{node_pk}"


def gateway_subject(gateway_pk: int) -> str:
    return f"gateway-input-errors:{gateway_pk}"


def record_key(subject: str) -> str:
    return f"sensors:input-errors:{subject}"


def alarm_key(subject: str) -> str:
    return subject


def describe(skipped: list[Skipped], count: int | None = None) -> str:
    count = len(skipped) if count is None else count
    text = "; ".join(s.text() for s in skipped[:SHOWN])
    if count > SHOWN:
        text += f"; and {count - SHOWN} more"
    return text[:MAX_TEXT]


def counts(record: dict) -> dict[str, int]:
    """A record's counts in the three words staff are shown (#26):

    - `skipped`: values not stored or not counted (text, a bad time, node or input name, a
      request set aside, a late reading a step did not count);
    - `processed_late`: late readings every late step moved its clock back to, as emoncms's
      do: processed after all (the later steps ran), so not called skipped;
    - `duplicates`: readings a step had counted already (a hub resending rows it got no `ok`
      for), passed by unchanged: skipped as a duplicate, which is the hub's retry working,
      so they open no alarm."""
    late = int(record.get("late", 0))
    return {
        "skipped": int(record.get("count", 0)) - late,
        "processed_late": late,
        "duplicates": int(record.get("duplicates", 0)),
    }


def counted(record: dict) -> str:
    """ "2 skipped, 1 processed late, 3 skipped (duplicate)" from a record (`counts`)."""
    n = counts(record)
    parts = []
    if n["skipped"] or not (n["processed_late"] or n["duplicates"]):
        parts.append(f"{n['skipped']} skipped")
    if n["processed_late"]:
        parts.append(f"{n['processed_late']} processed late")
    if n["duplicates"]:
        parts.append(f"{n['duplicates']} skipped (duplicate)")
    return ", ".join(parts)


def as_json(record: dict) -> dict:
    """What the API answers for a record (`GET /api/v1/nodes/<id>/input-errors`)."""
    at = record.get("at", "")
    return {
        **counts(record),
        "text": counted(record) if record else "none",
        "last": record.get("last", ""),
        "at": int(at) if str(at).isdigit() else None,
    }


def alarm_message(label: str, record: dict, text: str) -> str:
    """The alarm's message: the counts in their own words, then the newest skips."""
    return (
        f"{label} sent values in accepted batches that were not stored as sent: "
        f"{counted(record)} so far (the rest is stored). Skipped: text, a bad time, node or "
        "input name, or a reading a step did not count; processed late: older than one already "
        f"counted, processed as emoncms does. Newest: {text}"
    )[:MAX_ALARM_TEXT]


def record(
    subject: str,
    label: str,
    skipped: list[Skipped],
    now: float | None = None,
    count: int | None = None,
    processed_late: int = 0,
) -> None:
    """Count the skipped values of one accepted batch and keep the alarm open. `count`: how
    many there were when `skipped` lists only some (the worker's late readings);
    `processed_late`: how many of those were processed after all (a step moved its clock back
    to them), kept apart in the record's `late` so the node page does not call them skipped."""
    if not skipped:
        return
    now = time.time() if now is None else now
    count = len(skipped) if count is None else count
    text = describe(skipped, count)
    key = record_key(subject)
    pipe = get_redis().pipeline(transaction=False)
    pipe.hincrby(key, "count", count)
    pipe.hincrby(key, "late", processed_late)
    pipe.hincrby(key, "unsynced", count)
    pipe.hset(key, mapping={"last": text, "at": int(now)})
    pipe.hget(key, "synced_at")
    pipe.zadd(OPEN_KEY, {subject: now})
    pipe.hmget(key, "count", "late", "duplicates")
    *_, unsynced, _, synced_at, newly_open, totals = pipe.execute()
    log.warning("%s: %d value(s) skipped in an accepted batch: %s", label, count, text)
    if not newly_open and synced_at is not None and 0 <= now - float(synced_at) < SYNC_EVERY_S:
        return
    # Take what this sync reports off the unsynced count (a concurrent record's increment
    # stays for the next sync), then count it on the alarm, which opens it if need be.
    pipe.hincrby(key, "unsynced", -int(unsynced))
    pipe.hset(key, "synced_at", now)
    pipe.execute()
    record_now = dict(zip(("count", "late", "duplicates"), (v or 0 for v in totals), strict=True))
    count_alarm(
        alarm_key(subject),
        alarm_message(label, record_now, text),
        add=int(unsynced),
        source="node",
    )


def record_duplicates(subject: str, count: int) -> None:
    """Count readings a step had counted already (`counts`: shown, but no alarm: a resent
    batch is emonhub doing its job, and the rows were stored the first time)."""
    if count > 0:
        get_redis().hincrby(record_key(subject), "duplicates", count)


# Whether a subject's input errors are due to close: its last skip (its score in OPEN_KEY) at
# or before `cutoff` (now - CLEAR_AFTER_S). Read-only, so a script can ask it beside its own
# work (the append's, sensors/ingest/stream.py: a clean post costs no round trip for it, issue
# #29) and the closing itself stays in `close`: a reply lost after the script ran (a replica
# that did not acknowledge, the web answering 503) leaves the subject open for the next clean
# batch, never its alarm open with nothing left to clear it.
DUE_LUA = """
local function input_errors_due(open_key, subject, cutoff)
  if subject == '' then return 0 end
  local since = redis.call('ZSCORE', open_key, subject)
  if since and tonumber(since) <= tonumber(cutoff) then return 1 end
  return 0
end
"""


def cutoff(now: float | None = None) -> float:
    """The latest last-skip time a clean batch at `now` closes (DUE_LUA's `cutoff`)."""
    return (time.time() if now is None else now) - CLEAR_AFTER_S


def close(subject: str) -> None:
    """Close a subject's input errors that a clean batch found due (DUE_LUA): out of the open
    set, then its alarm cleared. Two batches at once close it once (the ZREM decides)."""
    redis = get_redis()
    if redis.zrem(OPEN_KEY, subject):
        redis.hdel(record_key(subject), "unsynced", "synced_at")
        clear_alarm(alarm_key(subject))


def clean(subjects: Iterable[str], now: float | None = None) -> None:
    """Batches with nothing skipped arrived for these subjects: close alarms that are due.
    (The web's posts ask the same inside their append: `DUE_LUA`.)"""
    subjects = list(subjects)
    if not subjects:
        return
    limit = cutoff(now)
    pipe = get_redis().pipeline(transaction=False)
    for subject in subjects:
        pipe.zscore(OPEN_KEY, subject)
    for subject, since in zip(subjects, pipe.execute(), strict=True):
        if since is not None and float(since) <= limit:
            close(subject)


def summary(subject: str) -> dict[str, str]:
    """{count, late, duplicates, last, at} of a subject's input errors (empty when it never
    had one)."""
    return summaries([subject])[subject]


def summaries(subjects: list[str]) -> dict[str, dict[str, str]]:
    """`summary` of many subjects in one round trip (the inputs page lists every node)."""
    pipe = get_redis().pipeline(transaction=False)
    for subject in subjects:
        pipe.hgetall(record_key(subject))
    return {
        subject: {k.decode(): v.decode() for k, v in raw.items()}
        for subject, raw in zip(subjects, pipe.execute(), strict=True)
    }
