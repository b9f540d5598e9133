"""manage.py import_emoncms against folders of real PHPFina pairs, good and corrupt."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from feeds.models import Feed
from feeds.store import phpfina, service

pytestmark = pytest.mark.django_db


def emoncms_pair(directory, emon_id, interval, start, values):
    (directory / f"{emon_id}.meta").write_bytes(np.array([0, 0, interval, start], "<u4").tobytes())
    (directory / f"{emon_id}.dat").write_bytes(np.asarray(values, "<f4").tobytes())


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("import_emoncms", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def source(tmp_path):
    directory = tmp_path / "phpfina"
    directory.mkdir()
    emoncms_pair(directory, 5, 10, 1000, [1, 2, 3])
    emoncms_pair(directory, 9, 60, 600, [7, np.nan, 8])
    return directory


def test_it_registers_each_pair_under_a_new_id_with_identical_bytes(source, feed_dir, redis_client):
    out, _ = run(str(source))
    assert "imported 2, skipped 0 already imported, refused 0" in out
    assert "[###" in out and "2/2" in out
    five = Feed.objects.get(tag="emoncms", name="5")
    nine = Feed.objects.get(tag="emoncms", name="9")
    assert (five.interval, nine.interval) == (10, 60)
    for emon_id, feed in ((5, five), (9, nine)):
        for ext in ("meta", "dat"):
            assert (feed_dir / f"{feed.id}.{ext}").read_bytes() == (
                source / f"{emon_id}.{ext}"
            ).read_bytes()
    assert service.read(nine.id, 600, 720, 60) == [[600_000, 7.0], [660_000, None], [720_000, 8.0]]


def test_it_can_be_rerun_and_skips_what_it_imported(source, feed_dir):
    run(str(source))
    out, _ = run(str(source))
    assert "imported 0, skipped 2" in out
    assert Feed.objects.count() == 2


def test_ids_limit_the_import(source, feed_dir):
    run(str(source), "--ids", "9", "--tag", "old", "--public")
    feed = Feed.objects.get()
    assert (feed.tag, feed.name, feed.public) == ("old", "9", True)


def test_an_unknown_id_is_an_error(source, feed_dir):
    with pytest.raises(CommandError, match=r"no \.meta file for id\(s\) \[4\]"):
        run(str(source), "--ids", "4")


@pytest.mark.parametrize(
    ("meta", "dat", "message"),
    [
        (b"\0" * 12, b"", "meta is 12 bytes, expected 16"),
        (np.array([0, 0, 10, 0], "<u4").tobytes(), b"\0" * 7, "7 bytes is not a multiple of 4"),
        (np.array([0, 0, 0, 0], "<u4").tobytes(), b"", "meta interval is 0"),
        (np.array([0, 0, 10, 0], "<u4").tobytes(), None, "is missing"),
    ],
)
def test_corrupt_pairs_are_refused_with_a_clear_message_and_others_imported(
    source, feed_dir, meta, dat, message
):
    (source / "7.meta").write_bytes(meta)
    if dat is not None:
        (source / "7.dat").write_bytes(dat)
    with pytest.raises(CommandError, match="1 feed\\(s\\) refused") as exc:
        run(str(source))
    assert message in str(exc.value)
    assert sorted(Feed.objects.values_list("name", flat=True)) == ["5", "9"]
    ids = Feed.objects.values_list("id", flat=True)
    assert sorted(p.name for p in feed_dir.iterdir()) == sorted(
        f"{i}.{ext}" for i in ids for ext in ("dat", "meta")
    )


def test_a_missing_directory_is_an_error(tmp_path, feed_dir):
    with pytest.raises(CommandError, match="is not a directory"):
        run(str(tmp_path / "nope"))


def test_imported_files_take_new_points(source, feed_dir, redis_client):
    run(str(source), "--ids", "5")
    feed = Feed.objects.get()
    service.log_points([(feed.id, 1030, 4.0)])
    service.commit_all(now=2_000_000_000)
    assert phpfina.read(feed_dir, feed.id, 1000, 1030, 10)[-1] == [1_030_000, 4.0]


def test_each_imported_feed_gets_its_last_value_from_the_file(source, feed_dir, redis_client):
    # emoncms 9 ends in NaN: the last value is the newest finite slot, 720 s -> 8.0
    emoncms_pair(source, 9, 60, 600, [7, np.nan, 8, np.nan])
    run(str(source))
    five = Feed.objects.get(tag="emoncms", name="5")
    nine = Feed.objects.get(tag="emoncms", name="9")
    assert service.last_value(five.id) == (1020, 3.0)
    assert service.last_value(nine.id) == (720, 8.0)
