"""Log lines bounded a minute, so what arrives from the network cannot fill the disk through
the log.

`LineBudget` counts lines against a window on the caller's clock (the BACnet server's
malformed datagrams use it directly); `BudgetedLines` logs lines each within the budget of its
kind (the BACnet server's refused writes and subscriptions: one kind flooded leaves the others
their lines). `LibraryLineBudget` is a logging filter on the console
handler (bms/settings.py LOGGING) for the libraries that log a line for each packet they are
sent, well-formed ones included: bacpypes3 warns once for every ReadPropertyMultiple asking for
a property an object does not have, and a head-end that polls so would write a line every
poll, for ever. Each library (the logger tree named by a prefix) has its own budget; past it
its lines are counted, and the next one logged says how many were left out. Our own loggers
are never dropped here: each bounds what it logs itself where a sender chooses the rate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

WINDOW_S = 60.0
LIBRARY_LINES_PER_MINUTE = 20
# Libraries whose loggers write a line per packet a peer sends (each its own budget).
CHATTY_LIBRARIES = ("bacpypes3",)


class LineBudget:
    """At most `per_window` lines in each `window_s` window (from the first line of it); the
    lines past it are counted, and the next line logged says how many were left out. `now` is
    the caller's monotonic clock."""

    def __init__(self, per_window: int, window_s: float = WINDOW_S) -> None:
        self.per_window, self.window_s = per_window, window_s
        self._window_start: float | None = None
        self._logged = 0
        self.suppressed = 0

    def take(self, now: float) -> int | None:
        """None when this line is not to be logged (counted instead); else how many lines were
        left out since the last one logged."""
        if self._window_start is None or now - self._window_start >= self.window_s:
            self._window_start, self._logged = now, 0
        if self._logged >= self.per_window:
            self.suppressed += 1
            return None
        self._logged += 1
        left_out, self.suppressed = self.suppressed, 0
        return left_out


class KindBudgets:
    """A `LineBudget` for each kind of line, made on first use, on one clock, thread-safe (a
    web process's threads share its log handler; the BACnet server's network and main threads
    both log refusals): a flood of one kind cannot push the others out."""

    def __init__(
        self,
        per_window: int,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_window, self.window_s, self.clock = per_window, window_s, clock
        self._budgets: dict[str, LineBudget] = {}
        self._lock = threading.Lock()

    def take(self, kind: str) -> int | None:
        """`LineBudget.take` for `kind`'s line now."""
        with self._lock:
            budget = self._budgets.get(kind)
            if budget is None:
                budget = self._budgets[kind] = LineBudget(self.per_window, self.window_s)
            return budget.take(self.clock())


class LibraryLineBudget(logging.Filter):
    """Bounds the lines of each library in `libraries` (a logger name and its children) to
    `per_minute` a minute; every other record passes untouched."""

    def __init__(
        self,
        libraries: tuple[str, ...] = CHATTY_LIBRARIES,
        per_minute: int = LIBRARY_LINES_PER_MINUTE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.libraries = libraries
        self._budgets = KindBudgets(per_minute, clock=clock)

    def _library(self, name: str) -> str | None:
        for library in self.libraries:
            if name == library or name.startswith(library + "."):
                return library
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        library = self._library(record.name)
        if library is None:
            return True
        left_out = self._budgets.take(library)
        if left_out is None:
            return False
        if left_out:
            # Said in the line itself: the message is formatted here, once, with the count.
            record.msg = (
                f"{record.getMessage()} ({left_out} more {library} lines left out before it)"
            )
            record.args = None
        return True


class BudgetedLines:
    """One `LineBudget` for each kind of line (a refused write over the rate, a refused
    SubscribeCOV, ...; `KindBudgets`), each kind at `per_window` lines a window. `warning` logs
    a line within its kind's budget; the next one logged says how many of its kind were left
    out."""

    def __init__(
        self,
        logger: logging.Logger,
        per_window: int = LIBRARY_LINES_PER_MINUTE,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self._budgets = KindBudgets(per_window, window_s, clock)

    def warning(self, kind: str, msg: str, *args: object) -> bool:
        """Log `msg % args` as a warning unless `kind` has used its lines this window (then
        counted). True when logged."""
        left_out = self._budgets.take(kind)
        if left_out is None:
            return False
        if left_out:
            msg = f"{msg} ({left_out} more such lines left out before it)"
        self.logger.warning(msg, *args)
        return True
