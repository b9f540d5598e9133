"""The beat task feeds.tasks.commit_buffer run by a real Celery worker process."""

from __future__ import annotations

import time

import numpy as np
import pytest

from feeds.models import Feed
from feeds.store import service
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


def test_a_real_worker_commits_the_buffer_to_the_files(
    transactional_db, redis_client, celery_worker
):
    from feeds.tasks import commit_buffer

    feed = Feed.objects.create(name="worker-commit", interval=10)
    now = int(time.time()) // 10 * 10
    service.log_points([(feed.id, now - 100 + 10 * i, float(i)) for i in range(10)])
    commit_buffer.delay()
    dat = service.feed_dir() / f"{feed.id}.dat"
    wait_for(lambda: not redis_client.exists(f"feeds:buf:{feed.id}"), 30, "the worker's commit")
    assert np.fromfile(dat, "<f4").tolist() == [float(i) for i in range(10)]
    assert service.read(feed.id, now - 100, now - 10, 10)[-1] == [(now - 10) * 1000, 9.0]
