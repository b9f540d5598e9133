"""Two emonPis both with `emontx1/use_kwh` both move (issue #26 item 9): a feed whose tag
already has its name here is imported under a free name, and the report says so, one line
each; never a traceback. Each import is of the backup module's archive around a real
MariaDB dump (tests/sensors/make_emoncms_backup.py)."""

from __future__ import annotations

import time

import pytest

from feeds.models import Feed
from sensors.models import EmoncmsOrigin, Sensor, Site
from tests.sensors import make_emoncms_backup as backup
from tests.sensors.test_import_emoncms_site import run

pytestmark = pytest.mark.django_db

NOW = int(time.time())


@pytest.fixture
def emoncms_files(tmp_path):
    return backup.write_site(tmp_path / "emoncms", NOW)


@pytest.fixture
def archive(tmp_path, emoncms_files):
    return backup.make_archive(emoncms_files, tmp_path / "emoncms-backup.tar.gz")


def imported_feed(source: str, emoncms_id: int) -> Feed:
    return EmoncmsOrigin.objects.get(source=source, kind="feed", emoncms_id=emoncms_id).feed


def test_a_second_emonpi_with_the_same_feed_names_is_renamed_and_reported(
    archive, emoncms_files, feed_dir, site, redis_client
):
    run(archive, "--site", site.slug, "--source-name", "house")
    barn = Site.objects.create(name="Barn", slug="barn")
    out = run(archive, "--site", barn.slug, "--source-name", "barn")
    assert "feeds: 3 imported" in out and "feeds renamed: 3" in out, out
    for line in (
        "feed 1 emontx1:power1 -> emontx1:power1 (barn 1)",
        "feed 2 emontx1:use_kwh -> emontx1:use_kwh (barn 2)",
        "feed 3 emonth:outside -> emonth:outside (barn 3)",
    ):
        assert f"renamed, the name was taken: {line}" in out, (line, out)
    house_kwh, barn_kwh = imported_feed("house", 2), imported_feed("barn", 2)
    assert (house_kwh.tag, house_kwh.name) == ("emontx1", "use_kwh")  # the first kept its name
    assert (barn_kwh.tag, barn_kwh.name, barn_kwh.unit) == ("emontx1", "use_kwh (barn 2)", "kWh")
    for ext in ("meta", "dat"):
        assert (feed_dir / f"{barn_kwh.pk}.{ext}").read_bytes() == (
            emoncms_files / "phpfina" / f"2.{ext}"
        ).read_bytes()
    # the barn's power1 integrates into the barn's kWh feed, not the house's
    barn_power = Sensor.objects.get(node__site=barn, node__name="emontx1", key="power1")
    assert barn_power.processes[1] == {"process": "power_to_kwh", "feed": barn_kwh.pk}


def test_a_third_emonpi_of_the_same_names_imports_too(archive, feed_dir, site, redis_client):
    """The renamed form can be taken as well (a third emonPi, or a feed named so by hand)."""
    Feed.objects.create(tag="emontx1", name="use_kwh (third 2)", interval=10)
    for n, source in enumerate(("first", "second", "third")):
        where = site if n == 0 else Site.objects.create(name=source, slug=source)
        out = run(archive, "--site", where.slug, "--source-name", source)
        assert "feeds: 3 imported" in out, out
    names = set(Feed.objects.filter(tag="emontx1", name__startswith="use_kwh")
                .values_list("name", flat=True))  # fmt: skip
    assert names == {"use_kwh", "use_kwh (second 2)", "use_kwh (third 2)", "use_kwh (third 2 2)"}
    assert imported_feed("third", 2).name == "use_kwh (third 2 2)"


def test_a_long_name_stays_within_the_field_when_renamed(archive, feed_dir, site, redis_client):
    long_name = "x" * 100
    Feed.objects.create(tag="emontx1", name=long_name, interval=10)
    from sensors.emoncms_import.site import _free_name

    free = _free_name("emontx1", long_name, 2_147_483_647, "a-source-name")
    assert free is not None and len(free) <= 100 and free.endswith("(a-source-name 2147483647)")


def test_when_every_renamed_form_is_taken_the_feed_is_a_report_line(
    archive, feed_dir, site, redis_client, monkeypatch
):
    """The search for a free name is bounded (MAX_RENAME_TRIES): past it the feed is not
    imported and the report says why; the rest of the site still moves."""
    from sensors.emoncms_import import site as emoncms_site

    monkeypatch.setattr(emoncms_site, "MAX_RENAME_TRIES", 2)
    for name in ("use_kwh", "use_kwh (emoncms 2)", "use_kwh (emoncms 2 2)"):
        Feed.objects.create(tag="emontx1", name=name, interval=10)
    out = run(archive, "--site", site.slug)
    assert (
        "not brought over: feed 2 emontx1:use_kwh: the tag already has 2 feeds of this name "
        "and its renamed forms: not imported" in out
    ), out
    assert "feeds: 2 imported" in out and "input 1 emontx1:power1: step 2 4:2" in out, out
    assert Feed.objects.filter(tag="emontx1", name__startswith="use_kwh").count() == 3


def test_a_second_sites_backup_under_the_first_ones_source_name_is_refused_saying_why(
    archive, feed_dir, site, redis_client
):
    """Feed and input ids repeat between emonPis, and a run is recognised by source name and
    emoncms id: the barn's backup under the house's source name found every id "already here"
    and imported nothing, reporting success. Now it is refused with the reason, nothing done."""
    from django.core.management.base import CommandError

    run(archive, "--site", site.slug)  # the default source name, "emoncms"
    barn = Site.objects.create(name="Barn", slug="barn")
    feeds, sensors = Feed.objects.count(), Sensor.objects.count()
    with pytest.raises(CommandError) as refused:
        run(archive, "--site", barn.slug)
    assert str(refused.value) == (
        f"source name 'emoncms' was imported into {site.name}; this import goes to Barn: give it "
        "its own --source-name (one per emoncms), nothing was imported"
    )
    assert (Feed.objects.count(), Sensor.objects.count()) == (feeds, sensors)
    # Run again into its own site, it is the same run as before: allowed, nothing doubles.
    assert "feeds: 0 imported, 3 already here" in run(archive, "--site", site.slug)
    out = run(archive, "--site", barn.slug, "--source-name", "barn")  # as the message says
    assert "feeds: 3 imported" in out and "feeds renamed: 3" in out, out
