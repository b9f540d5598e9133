"""Feed-store fixtures: a fresh feed directory per test, the real Redis, a FeedBuffer on it."""

from __future__ import annotations

import pytest

from feeds.store.buffer import FeedBuffer


@pytest.fixture
def feed_dir(tmp_path, settings):
    directory = tmp_path / "feeds"
    directory.mkdir()
    settings.BMS_FEED_DIR = directory
    return directory


@pytest.fixture
def buffer(redis_client) -> FeedBuffer:
    return FeedBuffer(redis_client)
