"""Writes from the BACnet network (control/bacnet_server.py + control/bacnet_writes.py), sent by
the independent bac-py client in its own process, decided on this (main) thread as the
`bacnet_server` command does: refused unless an engineer enabled them on the zone, and each
accepted one an Override whose reason names the writer's address."""

from __future__ import annotations

import json
import math
import subprocess
from concurrent.futures import Future
from datetime import timedelta

import pytest
from django.utils import timezone

from control import bacnet_writes, holds, runtime
from control.bacnet_server import (
    MAX_PENDING_WRITES,
    SiteDevice,
    ZonePoint,
    held_setpoint,
    zone_points,
)
from control.bacnet_writes import NetworkWrite, WriteRefused
from control.models import Override
from control.runner import run_tick
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, PEER_PYTHON, free_udp_port

from . import factories as f
from .test_bacnet_server import CLIENT, peer


def peer_while_deciding(device: SiteDevice, *args: str) -> list[dict]:
    """Run the independent client while this thread decides the writes it sends."""
    if not PEER_PYTHON.exists():
        pytest.fail("No .venv-bacnet-peer: run `source scripts/setup.sh; bms_setup --for-tests`")
    proc = subprocess.Popen(
        [str(PEER_PYTHON), CLIENT, device.address, "--interface", PEER_HOST, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        while proc.poll() is None:
            device.handle_writes(bacnet_writes.apply, wait_s=0.1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def device():
    port = free_udp_port(OUR_HOST)
    site = SiteDevice(f"{OUR_HOST}/32:{port}", 4194001, "Test site")
    site.start()
    site.address = f"{OUR_HOST}:{port}"
    yield site
    site.stop()


def served(device: SiteDevice) -> None:
    device.update(zone_points())


@pytest.mark.django_db
def test_an_enabled_setpoint_write_becomes_an_override_naming_the_writer(redis_client, device):
    zone = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    answers = peer_while_deciding(device, "--write", f"analog-value,{zone.pk}=22.5")
    assert answers == [{"write": f"analog-value,{zone.pk}", "ok": True}]
    # The object reads back what was written (the client reads before it writes).
    again = peer_while_deciding(device, "--read", f"analog-value,{zone.pk}")
    assert again[0]["value"] == pytest.approx(22.5)
    override = Override.objects.get(zone=zone)
    assert override.setpoint == 22.5
    assert override.reason.startswith(f"BACnet write from {PEER_HOST}:")
    assert override.reason.endswith("setpoint 22.5 °C")
    assert override.created_by is None
    assert override.expires - override.starts == timedelta(minutes=120)
    # The tick works to it: below the setpoint the zone calls for heat, named as the override.
    run_tick(timezone.now())
    result = runtime.load_zones([zone.pk])[zone.pk]
    assert (result["demand"], result["target"]) == (True, 22.5)
    assert "to 22.5 °C" in result["reason"] and "BACnet write from" in result["reason"]


@pytest.mark.django_db
def test_a_setpoint_write_not_enabled_is_refused_and_nothing_changes(redis_client, device, caplog):
    zone = f.zone("Hall", temp=18.5)
    served(device)
    answers = peer_while_deciding(device, "--write", f"analog-value,{zone.pk}=22")
    assert answers == [
        {"write": f"analog-value,{zone.pk}", "error": "property: write_access_denied"}
    ]
    assert not Override.objects.exists()
    assert any("refused" in r.getMessage() and PEER_HOST in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_a_setpoint_outside_the_zones_limits_is_refused(redis_client, device):
    # frost off 7 °C, cut-off 28 °C
    zone = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    n = zone.pk
    answers = peer_while_deciding(
        device, "--write", f"analog-value,{n}=28", "--write", f"analog-value,{n}=6.9",
        "--write", f"analog-value,{n}=27.9",
    )  # fmt: skip
    assert [a.get("error") for a in answers] == [
        "property: value_out_of_range", "property: value_out_of_range", None,
    ]  # fmt: skip
    assert list(Override.objects.values_list("setpoint", flat=True)) == [27.9]


@pytest.mark.django_db
def test_an_occupancy_write_holds_comfort_or_setback_only_where_enabled(redis_client, device):
    hall = f.zone("Hall", temp=18.5, bacnet_occupancy_writable=True, setback_setpoint=16.0)
    # Setpoint writes only: its occupancy stays refused.
    store = f.zone("Store", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    answers = peer_while_deciding(
        device, "--write", f"binary-value,{hall.pk}=1", "--write", f"binary-value,{hall.pk}=0",
        "--write", f"binary-value,{store.pk}=1",
    )  # fmt: skip
    assert [a.get("error") for a in answers] == [None, None, "property: write_access_denied"]
    occupied, unoccupied = Override.objects.filter(zone=hall).order_by("pk")
    assert (occupied.setpoint, unoccupied.setpoint) == (hall.comfort_setpoint, 16.0)
    assert occupied.reason.endswith(": occupied") and unoccupied.reason.endswith(": unoccupied")
    assert not Override.objects.filter(zone=store).exists()


@pytest.mark.django_db
def test_an_occupancy_write_other_than_active_or_inactive_is_refused(redis_client, device):
    # #31: an enumerated 2 or 7 was taken as inactive and made an unoccupied override.
    hall = f.zone("Hall", temp=18.5, bacnet_occupancy_writable=True, setback_setpoint=16.0)
    served(device)
    answers = peer_while_deciding(
        device, "--write", f"binary-value,{hall.pk}=2", "--write", f"binary-value,{hall.pk}=7",
        "--write", f"binary-value,{hall.pk}=1",  # the bound: the last state there is
    )  # fmt: skip
    assert [a.get("error") for a in answers] == [
        "property: value_out_of_range", "property: value_out_of_range", None,
    ]  # fmt: skip
    assert list(Override.objects.filter(zone=hall).values_list("setpoint", flat=True)) == [
        hall.comfort_setpoint
    ]


@pytest.mark.django_db
def test_an_accepted_occupancy_write_reads_back_after_refreshes_while_its_override_holds(
    redis_client, device
):
    # #31: the next refresh showed the tick's mode ('manual_override': not occupied), so a
    # COV subscriber was told inactive though the occupied override held.
    hall = f.zone("Hall", temp=18.5, bacnet_occupancy_writable=True, setback_setpoint=16.0)
    served(device)
    assert peer_while_deciding(device, "--write", f"binary-value,{hall.pk}=1")[0]["ok"]
    run_tick(timezone.now())
    assert runtime.load_zones([hall.pk])[hall.pk]["mode"] == "manual_override"
    served(device)
    assert peer_while_deciding(device, "--read", f"binary-value,{hall.pk}")[0]["value"] == 1
    assert peer_while_deciding(device, "--write", f"binary-value,{hall.pk}=0")[0]["ok"]
    served(device)
    assert peer_while_deciding(device, "--read", f"binary-value,{hall.pk}")[0]["value"] == 0
    # Once the override ends, the zone's own programme shows again (no booking: unoccupied).
    later = timezone.now() + timedelta(minutes=121)
    assert [p.occupied for p in zone_points(later) if p.zone_id == hall.pk] == [False]
    Override.objects.filter(zone=hall).update(setpoint=hall.comfort_setpoint)
    assert [p.occupied for p in zone_points() if p.zone_id == hall.pk] == [True]


@pytest.mark.django_db
def test_unoccupied_without_a_setback_turns_heating_off_but_frost_still_wins(redis_client):
    zone = f.zone("Hall", temp=4.0, bacnet_occupancy_writable=True)  # below frost-on 5 °C
    now = timezone.now()
    write = NetworkWrite("occupancy", zone.pk, 0.0, "10.0.0.9:47808")
    override = bacnet_writes.apply(write, now=now)
    assert (override.state, override.setpoint) == (False, None)
    run_tick(now)
    result = runtime.load_zones([zone.pk])[zone.pk]
    assert (result["demand"], result["mode"]) == (True, "frost_protection")


def test_writes_waiting_are_bounded_and_an_unanswered_one_times_out(device):
    device.update([ZonePoint(1, "Hall", 20.0, 21.0, False, False)])
    # Nobody decides: the sender is told the device timed out, not left waiting.
    answers = peer(device.address, "--write", "analog-value,1=21")
    assert answers == [{"write": "analog-value,1", "error": "device: timeout"}]
    assert device.handle_writes(_never, wait_s=0) == 0  # the timed-out one is never decided
    # The queue full: the next write is refused at once.
    while device._writes.qsize() < MAX_PENDING_WRITES:
        device._writes.put_nowait((NetworkWrite("setpoint", 1, 21.0, "x"), Future()))
    answers = peer(device.address, "--write", "analog-value,1=21")
    assert answers == [{"write": "analog-value,1", "error": "device: device_busy"}]


def _never(write: NetworkWrite) -> None:
    raise AssertionError(f"no write should be decided here: {write}")


@pytest.mark.django_db
def test_an_engineer_enables_writes_on_the_zones_api_a_viewer_or_booker_may_not(
    engineer_api, booker_api, viewer_api
):
    zone = f.zone("Hall")
    url = f"/api/v1/zones/{zone.pk}"
    for api in (viewer_api, booker_api):
        assert api.patch(url, {"bacnet_setpoint_writable": True}, format="json").status_code == 403
    bad = engineer_api.patch(url, {"bacnet_occupancy_writable": "perhaps"}, format="json")
    assert bad.status_code == 400 and "bacnet_occupancy_writable" in bad.json()["fields"]
    ok = engineer_api.patch(url, {"bacnet_setpoint_writable": True}, format="json")
    assert ok.status_code == 200 and ok.json()["bacnet_setpoint_writable"] is True
    zone.refresh_from_db()
    assert (zone.bacnet_setpoint_writable, zone.bacnet_occupancy_writable) == (True, False)


@pytest.mark.django_db
def test_an_override_holding_a_setpoint_out_of_the_zones_limits_is_refused_on_the_api(
    engineer_api,
):
    zone = f.zone("Hall")  # frost off 7 °C, cut-off 28 °C
    now = timezone.now()
    body = {"zone": zone.pk, "state": True, "reason": "test", "starts": now.isoformat(),
            "expires": (now + timedelta(hours=1)).isoformat()}  # fmt: skip
    for setpoint in (28, 6.5):
        refused = engineer_api.post(
            "/api/v1/overrides", {**body, "setpoint": setpoint}, format="json"
        )
        assert refused.status_code == 400 and "setpoint" in refused.json()["fields"]
    assert not Override.objects.exists()
    held = engineer_api.post("/api/v1/overrides", {**body, "setpoint": 21.5}, format="json")
    assert held.status_code == 201 and held.json()["setpoint"] == 21.5


@pytest.mark.django_db
def test_an_accepted_setpoint_write_reads_back_at_once_and_after_a_refresh_before_the_tick(
    redis_client, device
):
    # #31: the setpoint object showed the last tick's target, so a refresh between the write
    # and the next tick showed the value from before the write again.
    zone = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    run_tick(timezone.now())
    served(device)
    ref = f"analog-value,{zone.pk}"
    assert peer(device.address, "--read", ref)[0]["value"] != pytest.approx(22.5)
    assert peer_while_deciding(device, "--write", f"{ref}=22.5") == [{"write": ref, "ok": True}]
    assert peer(device.address, "--read", ref)[0]["value"] == pytest.approx(22.5)  # at once
    served(device)  # the refresh, before any tick
    assert peer(device.address, "--read", ref)[0]["value"] == pytest.approx(22.5)
    run_tick(timezone.now())
    served(device)
    assert peer(device.address, "--read", ref)[0]["value"] == pytest.approx(22.5)


def test_frost_protection_or_the_cut_off_at_the_tick_beat_a_held_setpoint_shown():
    held = Override(state=True, setpoint=22.5)
    assert held_setpoint(held, {"mode": "manual_override", "target": 22.5}) == 22.5
    assert held_setpoint(held, {"mode": "schedule", "target": 20.0}) == 22.5  # tick not yet run
    assert held_setpoint(held, {"mode": "frost_protection", "target": 7.0}) == 7.0
    assert held_setpoint(held, {"mode": "over_temperature", "target": None}) is None
    off = Override(state=False, setpoint=None)  # unoccupied without a setback: heating off
    assert held_setpoint(off, {"mode": "manual_override", "target": None}) is None
    assert held_setpoint(None, {"mode": "schedule", "target": 20.0}) == 20.0
    assert held_setpoint(None, None) is None


@pytest.mark.django_db
def test_a_disabled_zone_refuses_writes_and_never_shows_an_overrides_values(
    redis_client, device, caplog
):
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True,
                  bacnet_occupancy_writable=True)  # fmt: skip
    # Held before it was disabled: still in force in the database.
    bacnet_writes.apply(NetworkWrite("occupancy", hall.pk, 1.0, "10.0.0.9:47808"))
    hall.enabled = False
    hall.save()
    served(device)
    n = hall.pk
    answers = peer_while_deciding(
        device, "--write", f"analog-value,{n}=22", "--write", f"binary-value,{n}=1",
        "--read", f"analog-value,{n}", "--read", f"binary-value,{n}",
    )  # fmt: skip
    # (The client reads before it writes.) As the docs say of a disabled zone: neither
    # occupied nor a setpoint (no tick works to it), whatever the override holds.
    assert [a["value"] for a in answers[:2]] == [0.0, 0]
    assert [a.get("error") for a in answers[2:]] == ["property: write_access_denied"] * 2
    assert Override.objects.count() == 1  # the one from before, nothing new
    assert [(p.setpoint, p.occupied) for p in zone_points()] == [(None, False)]
    assert sum("zone 'Hall' is disabled" in m for m in caplog.messages) == 2


@pytest.mark.django_db
def test_a_setpoint_past_any_limit_is_logged_with_the_zones_own_limits(redis_client, caplog):
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)  # frost-off 7, cut-off 28
    for value in (math.inf, math.nan, 31.0, 6.0):
        write = NetworkWrite("setpoint", hall.pk, value, "10.0.0.9:47808")
        with pytest.raises(WriteRefused) as refused:
            bacnet_writes.apply(write)
        assert refused.value.error_code == "valueOutOfRange"
    reasons = [m.split("): ", 1)[1] for m in caplog.messages]
    assert reasons == [
        f"setpoint {shown} °C is outside the limits of zone 'Hall': from 7 °C to below its "
        "cut-off 28 °C"
        for shown in ("inf", "nan", "31", "6")
    ]
    assert not Override.objects.exists()


@pytest.mark.django_db
def test_an_accepted_write_replaces_the_zones_earlier_write_of_its_kind_not_a_persons(
    redis_client, engineer
):
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True,
                  bacnet_occupancy_writable=True)  # fmt: skip
    now = timezone.now()
    person = holds.place(
        Override(zone=hall, starts=now, expires=now + timedelta(hours=1), state=True,
                 setpoint=20.0, reason="Choir practice"), engineer,
    )  # fmt: skip

    def write(kind: str, value: float) -> Override:
        return bacnet_writes.apply(NetworkWrite(kind, hall.pk, value, "10.0.0.9:47808"))

    first = write("setpoint", 21.0)
    occupied = write("occupancy", 1.0)
    latest = write("setpoint", 22.0)
    # A head-end re-writing its setpoint leaves one setpoint override in force: the first is
    # ended (kept, cancelled by the write that replaced it); the occupancy write and the
    # person's override are untouched.
    active = Override.objects.active().order_by("pk")
    assert list(active) == [person, occupied, latest]
    first.refresh_from_db()
    assert first.cancelled and first.cancelled_by == "BACnet write from 10.0.0.9:47808"
    # So cancelling it does not bring back the one before.
    holds.cancel(latest, engineer)
    assert list(Override.objects.active().order_by("pk")) == [person, occupied]
    # Occupancy replaces occupancy, whatever it holds.
    unoccupied = write("occupancy", 0.0)
    assert list(Override.objects.active().order_by("pk")) == [person, unoccupied]
    assert Override.objects.count() == 5  # every row kept: the audit trail


@pytest.mark.django_db
def test_the_admin_labels_the_write_switches_as_the_docs_and_history_name_them(admin_client):
    hall = f.zone("Hall")
    page = admin_client.get(f"/admin/control/zone/{hall.pk}/change/").content.decode()
    assert "BACnet setpoint writes accepted" in page
    assert "BACnet occupancy writes accepted" in page
    assert "Bacnet setpoint writable" not in page
