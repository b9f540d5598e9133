"""The feed commit at a lower CPU priority than ingest and the web (issue #29).

At 10,000 nodes the commit writes and fsyncs 50,000 files every minute: about 0.3 of a core
for 30 s, in the same Celery worker process pool as the ingest drain. On a machine whose
cores are all in use, readings then waited 3–4 s for the drain (docs/BENCHMARKS.md, "10,000
nodes, third step"). Points wait in Redis (readable there) until the commit writes them, so
the commit can wait; the drain and the web cannot.

A process cannot lower its nice value back without privileges, and the worker's processes run
drains as well as commits, so the commit runs in a thread of its own whose nice value (on
Linux a thread's own) is raised, and the task's thread waits for it. The thread touches Redis
and the files only, never the database. If the waiting thread is interrupted (Celery's soft
time limit), the commit stops at its next batch (`checkpoint`), as if it had lost its lock:
what it had not written stays in Redis for the next commit.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
_current = threading.local()


class Cancelled(Exception):
    """The caller stopped waiting for this commit: it stops between two batches."""


def checkpoint() -> None:
    """Raise Cancelled if the thread running this commit was told to stop."""
    stop = getattr(_current, "stop", None)
    if stop is not None and stop.is_set():
        raise Cancelled("the task that ran this commit stopped waiting for it")


def run(fn: Callable[[], T], nice: int) -> T:
    """fn() in a thread `nice` steps below this one's CPU priority (0: here, as it is); its
    result, or its exception raised here."""
    if nice <= 0:
        return fn()
    stop = threading.Event()
    out: dict[str, object] = {}

    def body() -> None:
        _current.stop = stop
        lower(nice)
        try:
            out["value"] = fn()
        except BaseException as exc:  # raised again in the waiting thread
            out["error"] = exc

    thread = threading.Thread(target=body, name="feed-commit", daemon=True)
    thread.start()
    try:
        thread.join()
    except BaseException:
        stop.set()  # e.g. the soft time limit: the commit stops at its next batch
        thread.join()
        raise
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


def lower(nice: int) -> None:
    """Raise the calling thread's nice value by `nice` (at most 19). Where the system refuses,
    the commit runs at the priority it has, and says so."""
    me = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + nice))
    except (OSError, AttributeError) as exc:
        log.warning("the feed commit's priority could not be lowered: %s", exc)
