"""Sharded commits through real Celery workers: one worker per shard queue, each writing only
its shard's feeds; a shard without a worker waits (its points stay in Redis) while the other
shards commit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from feeds.models import Feed
from feeds.store import service
from tests.conftest import ROOT, test_database_url
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


def start_worker(name: str, queues: str, data_dir: Path, log_dir: Path) -> subprocess.Popen:
    env = dict(
        os.environ,
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        BMS_DATA_DIR=str(data_dir),  # its own feed root: the shard record stays out of others'
        BMS_FEED_SHARDS="2",
    )
    log = open(log_dir / f"{name}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bms", "worker", "-Q", queues, "-c", "1",
         "--without-gossip", "--without-mingle", "-l", "INFO", "-n", f"{name}-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def test_each_shard_is_committed_by_the_worker_on_its_queue(
    transactional_db, redis_client, settings, tmp_path
):
    from bms.celery import app
    from feeds.tasks import commit_buffer

    data_dir = tmp_path / "data"
    settings.BMS_FEED_DIR = data_dir / "feeds"
    settings.BMS_FEED_SHARDS = 2
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(4)]
    now = int(time.time()) // 10 * 10
    workers = [
        start_worker("shard0", "commit,commit-0", data_dir, tmp_path),
        start_worker("shard1", "commit-1", data_dir, tmp_path),
    ]
    try:
        wait_for(lambda: len(app.control.ping(timeout=0.5)) >= 2, 30, "both workers to answer")
        service.log_points([(f.id, now - 60, float(f.id)) for f in feeds])
        commit_buffer.delay()  # "commit everything": fans out to commit-0 and commit-1
        wait_for(lambda: redis_client.scard("feeds:dirty") == 0, 30, "both shards committed")
        for f in feeds:
            dat = data_dir / "feeds" / f"shard-{f.id % 2}" / f"{f.id}.dat"
            assert np.fromfile(dat, "<f4").tolist()[-1] == float(f.id)

        stop_process(workers[1])  # shard 1's writer is gone: its queue has no consumer
        service.log_points([(f.id, now - 50, f.id + 0.5) for f in feeds])
        commit_buffer.delay()
        wait_for(
            lambda: (
                {int(x) for x in redis_client.smembers("feeds:dirty")}
                == {f.id for f in feeds if f.id % 2 == 1}
            ),
            30,
            "shard 0 to commit its feeds alone",
            state=lambda: redis_client.smembers("feeds:dirty"),
        )
        assert redis_client.llen("commit-1") >= 1  # shard 1's commit waits for its worker
    finally:
        for w in workers:
            stop_process(w)
