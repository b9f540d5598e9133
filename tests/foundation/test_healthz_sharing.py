"""Deep /healthz checks (staff, the local monitor) share one check: a request that waited for a
check to finish takes its result instead of running a second one (an outside tester saw eight
local callers queue a one-second check each, 3 s on average)."""

from __future__ import annotations

import threading

from bms import health
from tests.wait import wait_for


def test_a_deep_caller_waiting_on_a_running_check_takes_its_result(monkeypatch):
    health.forget()
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def slow_checks() -> dict[str, dict]:
        runs.append(1)
        started.set()
        release.wait(30)  # held until the second caller is queued on the lock
        return {"database": {"ok": True}}

    monkeypatch.setattr(health, "run_checks", slow_checks)
    answers: list[dict] = []
    first = threading.Thread(target=lambda: answers.append(health.checked(deep=True)))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=lambda: answers.append(health.checked(deep=True)))
    second.start()
    # The second is waiting on the check's lock: let the first finish.
    wait_for(lambda: health._checking.locked(), 30, "the first check to hold the lock")
    release.set()
    first.join(30)
    second.join(30)
    assert len(answers) == 2 and answers[0] is answers[1]
    assert runs == [1]
    health.forget()


def test_a_deep_caller_after_a_finished_check_runs_a_new_one(monkeypatch):
    health.forget()
    runs: list[int] = []

    def checks() -> dict[str, dict]:
        runs.append(1)
        return {"database": {"ok": True}}

    monkeypatch.setattr(health, "run_checks", checks)
    health.checked(deep=True)
    health.checked(deep=True)
    assert runs == [1, 1]  # staff asking again get a fresh check, not the last one
    health.forget()
