"""Plain words on the staff pages (#28 item 7): no strategy identifier (`optimum_start`,
`anti_short_cycle`, `heating_plant`) where a person reads, "heating" not "calling", CUSUM, HDD
and R² explained on hover, no "Seminar room room", no "Modbus buss". The identifiers stay in
the API."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from control import runtime
from control.engine import specs
from control.models import Zone
from control.words import STRATEGY_WORDS, strategy_words
from energy.models import Meter, MeterNode
from feeds.models import Feed
from sensors.models import ModbusBus, Site

pytestmark = pytest.mark.django_db


def _strategy_names() -> set[str]:
    return {
        v
        for k, v in vars(specs).items()
        if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z_]+", v)
    }


def test_every_strategy_name_has_words_without_underscores():
    assert _strategy_names() <= set(STRATEGY_WORDS)
    assert not any("_" in words for words in STRATEGY_WORDS.values())
    assert strategy_words("a_new_one") == "a new one"


@pytest.fixture
def engineer_client(engineer) -> Client:
    c = Client()
    c.force_login(engineer)
    return c


def test_plant_status_shows_words_not_identifiers(engineer_client, redis_client):
    zone = Zone.objects.create(name="Seminar room", slug="seminar")
    runtime.save_zones(
        {
            zone.pk: {
                "mode": specs.OPTIMUM_START,
                "reason": "Booking 'Yoga' 10:00, pre-heat 45 min",
                "demand": True,
                "flags": [],
                "target": 21.0,
                "evaluated_at": 1_800_000_000.0,
            }
        }
    )
    html = engineer_client.get("/staff/control/").content.decode()
    row = html[html.index(f'id="zone-{zone.slug}"') :]
    row = row[: row.index("</tr>")]
    assert "warming up early" in row and ">heating<" in row
    assert "optimum_start" not in html and "calling" not in row


def test_energy_terms_have_hover_help_and_a_room_is_not_a_room_room(engineer_client, db):
    site = Site.objects.create(name="CAT")
    building = MeterNode.objects.create(site=site, name="Lecture block", kind="building")
    MeterNode.objects.create(site=site, parent=building, name="Seminar room", kind="room")
    MeterNode.objects.create(site=site, parent=building, name="Workshop", kind="room")
    feed = Feed.objects.create(name="main kwh", tag="lecture", interval=10)
    Meter.objects.create(
        node=building, name="Main", fuel="electricity", source="cumulative", feed=feed
    )
    html = engineer_client.get(f"/staff/energy/?site={site.pk}&node={building.pk}").content.decode()
    text = re.sub(r"<[^>]+>", " ", html)
    assert "Seminar room room" not in re.sub(r"\s+", " ", text)
    assert re.search(r"Workshop</a>\s*<span class=\"muted\">room</span>", html)
    for term in ("Running difference", "Degree days"):
        assert re.search(rf'<abbr class="help" title="[^"]+">{term}</abbr>', html), term


def test_the_admin_says_modbus_buses(engineer_client, superuser):
    assert str(ModbusBus._meta.verbose_name_plural) == "Modbus buses"
    c = Client()
    c.force_login(superuser)
    assert "Modbus buses" in c.get("/admin/sensors/").content.decode()
