"""The site as a BACnet device (control/bacnet_server.py), read from an independent client:
bac-py (tests/control/bacnet_peer_client.py) in its own process and Python, on its own loopback
address, reads a zone's objects as a head-end would. Its writes: tests/control/test_bacnet_writes.py."""

from __future__ import annotations

import json
import logging
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from control.bacnet_server import (
    MAX_ZONES,
    SiteDevice,
    ZonePoint,
    project_version,
    site_location,
    zone_points,
)
from control.models import Booking, Zone
from control.runner import run_tick
from sensors.models import Site
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, PEER_PYTHON, free_udp_port

from . import factories as f

CLIENT = str(Path(__file__).with_name("bacnet_peer_client.py"))


def peer(server: str, *args: str) -> list[dict]:
    """What the independent client read and wrote, one answer per request."""
    if not PEER_PYTHON.exists():
        pytest.fail("No .venv-bacnet-peer: run `source scripts/setup.sh; bms_setup --for-tests`")
    done = subprocess.run(
        [str(PEER_PYTHON), CLIENT, server, "--interface", PEER_HOST, *args],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture
def device():
    port = free_udp_port(OUR_HOST)
    site = SiteDevice(f"{OUR_HOST}/32:{port}", 4194001, "Test site", location="Church hall")
    site.start()
    site.address = f"{OUR_HOST}:{port}"
    yield site
    site.stop()


@pytest.mark.django_db
def test_a_head_end_reads_a_zones_objects(redis_client, device):
    zone = f.zone("Hall", temp=18.5)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=1), end=now + timedelta(hours=1)
    )
    run_tick(now)
    assert device.update(zone_points()) == 1

    n = zone.pk
    answers = peer(
        device.address,
        "--read", f"analog-input,{n}", "--read", f"analog-input,{n}:object-name",
        "--read", f"analog-value,{n}", "--read", f"binary-value,{n}",
        "--read", f"binary-input,{n}",
    )  # fmt: skip
    values = [a.get("value") for a in answers[:5]]
    assert values[0] == pytest.approx(18.5)
    assert values[1] == "Hall temperature"
    assert values[2] == pytest.approx(20.0)  # the booking's setpoint
    assert values[3:] == [1, 1]  # occupied (booked) and calling for heat: BinaryPV active


@pytest.mark.django_db
def test_a_zone_without_a_reading_shows_no_sensor_and_a_removed_zone_leaves(redis_client, device):
    hall, store = f.zone("Hall"), f.zone("Store")
    device.update(zone_points())
    reliability = peer(device.address, "--read", f"analog-input,{hall.pk}:reliability")
    assert reliability[0]["value"] == 1  # BACnetReliability 1: no-sensor
    store_id = store.pk
    store.delete()
    device.update(zone_points())
    gone = peer(device.address, "--read", f"analog-input,{store_id}")
    assert gone[0]["error"] == "object: unknown_object"


@pytest.mark.django_db
def test_a_renamed_zone_is_named_anew_at_the_next_refresh(redis_client, device):
    hall, store = f.zone("Hall", temp=18.5), f.zone("Store")
    device.update(zone_points())
    # The store takes the hall's old name in the same refresh: every old name is let go first.
    Zone.objects.filter(pk=hall.pk).update(name="Main hall")
    Zone.objects.filter(pk=store.pk).update(name="Hall")
    device.update(zone_points())
    n, s = hall.pk, store.pk
    names = peer(
        device.address,
        "--read", f"analog-input,{n}:object-name", "--read", f"analog-value,{n}:object-name",
        "--read", f"binary-value,{n}:object-name", "--read", f"binary-input,{n}:object-name",
        "--read", f"analog-input,{s}:object-name", "--read", f"analog-input,{n}",
    )  # fmt: skip
    assert [a["value"] for a in names[:5]] == [
        "Main hall temperature", "Main hall setpoint", "Main hall occupied",
        "Main hall heat demand", "Hall temperature",
    ]  # fmt: skip
    assert names[5]["value"] == pytest.approx(18.5)  # its values with it


def test_the_zones_served_are_bounded(device):
    many = [ZonePoint(n, f"Zone {n}", 20.0, 21.0, False, False) for n in range(1, MAX_ZONES + 2)]
    assert device.update(many) == MAX_ZONES
    last = peer(device.address, "--read", f"analog-input,{MAX_ZONES}", "--read",
                f"analog-input,{MAX_ZONES + 1}")  # fmt: skip
    assert last[0]["value"] == pytest.approx(20.0)
    assert last[1]["error"] == "object: unknown_object"


def test_the_server_is_off_unless_configured(settings):
    settings.BMS_BACNET_SERVER_ENABLED = False
    with pytest.raises(CommandError, match="BMS_BACNET_SERVER_ENABLED=1"):
        call_command("bacnet_server", "--once")


@pytest.mark.django_db
def test_the_command_serves_the_zones_once_configured(redis_client, settings, capsys, caplog):
    f.zone("Hall", temp=19.0)
    settings.BMS_BACNET_SERVER_ENABLED = True
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_SERVER_PORT = free_udp_port(OUR_HOST)
    caplog.set_level(logging.INFO)
    call_command("bacnet_server", "--once")
    assert "writes refused unless enabled on the zone" in capsys.readouterr().out
    # Through the logger (a timestamp on the site's log), not printed.
    assert "BACnet server: 0 feeds, 1 zones served" in caplog.messages


def test_the_device_names_its_vendor_model_version_and_location(device):
    assert SiteDevice(f"{OUR_HOST}/32:0", 4194002, "x").location == ""  # none given: empty
    answers = peer(
        device.address,
        *(f"--read=device,4194001:{p}" for p in (
            "vendor-name", "vendor-identifier", "model-name", "firmware-revision",
            "application-software-version", "location",
        )),
    )  # fmt: skip
    assert [a.get("value") for a in answers] == [
        "Open BMS", 999, "Open BMS site server", project_version(), project_version(), "Church hall",
    ]  # fmt: skip
    assert project_version() == "0.1.0"  # pyproject.toml's
    # A site named (or renamed) after the server started: the command sets it at a refresh.
    device.set_location("St Mary's church hall")
    (answer,) = peer(device.address, "--read=device,4194001:location")
    assert answer["value"] == "St Mary's church hall" and device.location == answer["value"]


@pytest.mark.django_db
def test_the_location_is_the_sites_name_when_there_is_one_site():
    assert site_location() == ""
    Site.objects.create(name="St Mary's\nchurch hall", slug="st-marys")
    assert site_location() == "St Mary's church hall"  # on one line
    Site.objects.create(name="Vicarage", slug="vicarage")
    assert site_location() == ""  # which one? none rather than a wrong one


@pytest.mark.django_db
def test_names_with_control_or_bidi_characters_are_shown_on_one_line_still_unique(
    redis_client, device
):
    tabbed = f.zone("Hall\tEast\u202e", temp=18.0)
    spaced = f.zone("Hall East", temp=18.0)
    broken = f.zone("Hall\nEast", temp=18.0)
    blank = f.zone("\n\u202e", temp=18.0)
    device.update(zone_points())
    names = peer(
        device.address,
        *(f"--read=analog-input,{z.pk}:object-name" for z in (tabbed, spaced, broken, blank)),
    )
    # The name as typed keeps it; the others, cleaned, meet it and take their id after it.
    assert [a["value"] for a in names] == [
        f"Hall East (zone {tabbed.pk}) temperature", "Hall East temperature",
        f"Hall East (zone {broken.pk}) temperature", f"Zone {blank.pk} temperature",
    ]  # fmt: skip
