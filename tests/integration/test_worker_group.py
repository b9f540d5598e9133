"""bms/worker_group.py, the small box's launcher: real Celery workers forked from one process
answer as the workers they are, each on its own queues, and the group stops as a whole: on
SIGTERM, and as soon as one of its workers dies (so run-site.sh's `wait -n` sees it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bms.worker_group import groups
from tests.conftest import ROOT, test_database_url
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


def test_the_command_line_splits_into_workers_with_their_own_environment():
    argv = ["-Q", "control", "-c", "1", "--", "BMS_BEAT_THREAD=1", "-Q", "ingest", "--"]
    assert groups(argv) == [
        ({}, ["-Q", "control", "-c", "1"]),
        ({"BMS_BEAT_THREAD": "1"}, ["-Q", "ingest"]),
    ]


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def group(transactional_db, redis_client, tmp_path):
    tag = os.getpid()
    env = dict(
        os.environ, DATABASE_URL=test_database_url(), DJANGO_SETTINGS_MODULE="bms.settings_test"
    )
    log = open(tmp_path / "group.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bms.worker_group",
         "-Q", "control", "-c", "1", "-n", f"gcontrol-{tag}@%h", "--without-gossip", "--without-mingle",
         "-l", "INFO", "--", "-Q", "ingest,commit", "-c", "1", "-n", f"gingest-{tag}@%h",
         "--without-gossip", "--without-mingle", "-l", "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()
    try:
        yield proc, tag, tmp_path / "group.log"
    finally:
        forked = children(proc.pid)
        stop_process(proc, timeout_s=40)
        for pid in forked:  # a test that failed may leave one: not into the next test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_each_worker_of_the_group_answers_on_its_own_queues(group):
    from bms.celery import app

    proc, tag, log = group
    names = {f"gcontrol-{tag}@", f"gingest-{tag}@"}

    def both_answer() -> bool:
        assert proc.poll() is None, log.read_text()
        answered = {n for reply in app.control.ping(timeout=0.5) for n in reply}
        return all(any(a.startswith(n) for a in answered) for n in names)

    wait_for(both_answer, 60, "both workers of the group to answer a ping", every_s=0)
    queues = app.control.inspect(timeout=2).active_queues() or {}
    mine = {w: sorted(q["name"] for q in qs) for w, qs in queues.items() if str(tag) in w}
    assert sorted(mine.values()) == [["commit", "ingest"], ["control"]], mine


def test_the_group_stops_every_worker_when_one_dies(group):
    proc, _tag, log = group
    wait_for(lambda: len(children(proc.pid)) == 2, 60, "the group to fork its two workers",
             state=lambda: log.read_text()[-2000:])  # fmt: skip
    workers = children(proc.pid)
    wait_for(lambda: all(children(w) for w in workers), 60, "each worker's pool",
             state=lambda: log.read_text()[-2000:])  # fmt: skip
    os.kill(workers[0], signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL
    assert not alive(workers[1])


def test_sigterm_stops_the_whole_group(group):
    proc, _tag, log = group
    wait_for(lambda: log.read_text().count(" ready.") == 2, 60, "both workers to be ready",
             state=lambda: log.read_text()[-2000:])  # fmt: skip
    workers = children(proc.pid)
    assert len(workers) == 2
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert not any(alive(w) for w in workers)
