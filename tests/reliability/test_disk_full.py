"""The data disk fills up: commits fail loudly, buffered points stay in Redis, the watchdog
raises the disk and backlog alarms, and everything recovers by itself once space returns.

A real full filesystem: a 2 MB tmpfs mounted over the feed directory (we run as root in CI
and here; the test is skipped, saying why, where mounting is not permitted)."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from alarms import watchdog
from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import phpfina, service
from feeds.tasks import commit_buffer

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_disk(tmp_path, settings):
    mount = tmp_path / "feeds"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {done.stderr.strip()}")
    settings.BMS_FEED_DIR = mount
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount, leave_bytes: int) -> None:
    """A ballast file taking all the space but `leave_bytes`."""
    import shutil

    free = shutil.disk_usage(mount).free
    with open(mount / "ballast", "wb") as fh:
        fh.write(b"\0" * max(free - leave_bytes, 0))


def test_disk_full_commit_fails_loudly_keeps_the_buffer_and_recovers(
    small_disk, redis_client, settings
):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    settings.BMS_ALARM_BACKLOG_AGE_S = 30
    from django.core import mail

    feed = Feed.objects.create(name="boiler flow", interval=10)
    t0 = int(time.time()) // 10 * 10 - 600_000  # a week back: 50,000 points of history
    points = [(feed.pk, t0 + 10 * i, float(i)) for i in range(50_000)]  # 200 kB of file
    fill(small_disk, leave_bytes=4096)
    service.log_points(points)

    with pytest.raises(OSError) as failure:
        commit_buffer()  # what the worker runs: the task fails, and says why, in its log
    assert "No space left" in str(failure.value)
    assert redis_client.strlen(f"feeds:buf:{feed.pk}") == 9 * len(points), "buffer lost"

    now = time.time()
    assert watchdog.check_disk()["ok"] is False
    watchdog.check_backlog(now)
    watchdog.check_backlog(now + 40)  # the same head record, 40 s on: commits are stuck
    open_keys = set(Alarm.objects.filter(cleared_at__isnull=True).values_list("key", flat=True))
    assert {watchdog.DISK_ALARM, watchdog.BACKLOG_ALARM} <= open_keys
    from alarms.tasks import send_alarm_digest

    assert send_alarm_digest() == 2 and len(mail.outbox) == 1  # one digest for both
    watchdog.check_disk()  # raised once, however often the watchdog looks
    assert Alarm.objects.filter(key=watchdog.DISK_ALARM).count() == 1

    (small_disk / "ballast").unlink()  # space returns
    assert commit_buffer()["points"] == len(points)
    stored = phpfina.open_data(small_disk, feed.pk)
    assert np.array_equal(stored, np.arange(len(points), dtype=np.float32))
    watchdog.check_disk()
    watchdog.check_backlog(now + 50)
    assert not Alarm.objects.filter(cleared_at__isnull=True).exists()


def test_a_full_disk_under_one_shards_directory_is_alarmed_by_name(
    small_disk, tmp_path, redis_client, settings
):
    """Sharded writers may keep each shard on a disk of its own: each is checked."""
    root = tmp_path / "root"
    root.mkdir()
    settings.BMS_FEED_DIR = root
    settings.BMS_FEED_SHARDS = 2
    settings.BMS_FEED_SHARD_DIRS = [str(root / "shard-0"), str(small_disk)]
    (root / "shard-0").mkdir()
    assert watchdog.check_disk()["ok"] is True
    fill(small_disk, leave_bytes=0)
    assert watchdog.check_disk()["ok"] is False
    [alarm] = Alarm.objects.filter(key=watchdog.DISK_ALARM, cleared_at__isnull=True)
    assert str(small_disk) in alarm.message
