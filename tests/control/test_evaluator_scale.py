"""The evaluator's work grows linearly with the site: a plant or heat main looking a zone up
must not walk the zone list for each of its zones (that made a 2,000-zone tick grow as
n^1.4, issue #29). Measured as work, not time: how many zones the evaluation reads from the
snapshot's zone list, for a site and for the same site four times as large."""

from __future__ import annotations

from datetime import timedelta

from control.engine.evaluator import evaluate
from control.engine.specs import BookingSpec, Reading, Snapshot, ZoneSpec

from .helpers import NOW, actuator_spec, plant_spec, snapshot, valve, zone
from .test_heat_main import GAS1, GAS2, main_spec, relay

BOILER, PUMP = 20, 21


class CountingZones(tuple):
    """The snapshot's zone tuple, counting every zone handed out by iteration or index."""

    visits = 0

    def __iter__(self):
        for z in super().__iter__():
            CountingZones.visits += 1
            yield z

    def __getitem__(self, index):
        CountingZones.visits += 1
        return super().__getitem__(index)


def site(n: int) -> Snapshot:
    """n booked zones of two valves each, all in one plant without a bypass (so it must show
    a circuit open) and one heat main of two sources. Every other zone's valves are confirmed
    open (it takes heat); the rest wait on theirs; every fifth room is below its frost limit (the boiler fires for those that take heat)."""
    booked = (BookingSpec("Day", NOW - timedelta(hours=1), NOW + timedelta(hours=8)),)
    zones: list[ZoneSpec] = []
    acts = {}
    for i in range(1, n + 1):
        temp = 3.0 if i % 5 == 0 else 15.0
        ids = (100 + 2 * i, 101 + 2 * i)
        zones.append(
            zone(temp, id=i, name=f"Room {i}", slug=f"room-{i}", actuator_ids=ids, bookings=booked)
        )
        for aid in ids:
            acts[aid] = valve(id=aid, name=f"Valve {aid}", is_on=i % 2 == 0, confirmed=True)
    acts[BOILER] = actuator_spec(id=BOILER, name="Boiler", kind="boiler", min_on_s=0, min_off_s=0)
    acts[PUMP] = actuator_spec(id=PUMP, name="Pump", kind="pump", min_on_s=0, min_off_s=0)
    acts[GAS1], acts[GAS2] = relay(GAS1, "Gas 1"), relay(GAS2, "Gas 2")
    zone_ids = tuple(z.id for z in zones)
    plant = plant_spec(1, "Boiler house", BOILER, zone_ids, pump_id=PUMP, has_bypass=False)
    main = main_spec(zone_ids=zone_ids, flow=Reading(NOW.timestamp() - 5, 60.0))
    snap = snapshot(zones, acts.values(), plants=(plant,), heat_mains=(main,))
    return Snapshot(**{**snap.__dict__, "zones": CountingZones(snap.zones)})


def zone_visits(n: int) -> int:
    snap = site(n)
    CountingZones.visits = 0
    result = evaluate(snap)
    # The site is what the test says: the plant fires, for frost, and every valve is decided.
    assert result.decisions[BOILER].state
    assert result.decisions[BOILER].reason.startswith("Frost protection: Room 10 3.0 °C")
    assert len(result.decisions) == 2 * n + 4
    return CountingZones.visits


def test_the_evaluation_reads_each_zone_a_fixed_number_of_times_whatever_the_site_size():
    small, large = zone_visits(50), zone_visits(200)
    assert small <= 5 * 50  # a few passes over the zone list, not one per zone
    assert large == 4 * small
