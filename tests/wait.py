"""The one way tests wait for something another process or thread does (#24).

A timeout here is an upper bound on waiting, not an assertion about speed: give it room for a
busy 2-core machine. Time that the code under test reasons about (expiry, cooldowns, staleness)
is not waited for at all: move a controlled clock instead (`time_machine`, or the code's `now=`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    timeout_s: float,
    what: str,
    every_s: float = 0.1,
    state: Callable[[], object] | None = None,
) -> T:
    """Poll `condition` until it returns something true, and return that.

    On timeout, fail naming `what`, the last value `condition` returned and, if given, what
    `state()` shows (a log tail, queue lengths) to say why.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(every_s)
    shown = f"\nstate: {state()}" if state is not None else ""
    raise AssertionError(
        f"timed out after {timeout_s} s waiting for {what}; last seen: {value!r}{shown}"
    )


def returns_within(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """`call()`'s result (or its exception), failing instead of hanging if it has not returned
    within `timeout_s`: a guard against a hang, not a measure of speed. The call runs in a
    daemon thread, so only for calls that do not use the test's database connection."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed back to the test's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True, name=f"returns_within: {what}")
    thread.start()
    thread.join(timeout_s)
    if not outcome:
        raise AssertionError(f"{what} had not returned after {timeout_s} s: hung?")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
