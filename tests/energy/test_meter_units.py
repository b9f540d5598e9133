"""A meter's feed must be in a unit that fits its fuel and source, and a unit given to the API
must agree with the fuel (found by the outside tester: an outside temperature feed in °C was
taken as an electricity register; `"unit": "kWh"` on a water meter was silently dropped).
Admin and API refuse the same (Meter.clean()); a feed in Wh or kW is scaled, on real files."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

from energy import refresh
from energy.models import Meter, MeterDay, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site

API = "/api/v1/energy"
NOW = 2_000_000_000


@pytest.fixture
def office(db) -> MeterNode:
    site = Site.objects.create(name="CAT", slug="cat", time_zone="Europe/London")
    return MeterNode.objects.create(site=site, name="Office", kind="building")


def _post(api, office, fuel, source, feed_unit, **extra):
    feed = Feed.objects.create(
        name=f"f{Feed.objects.count()}", tag="t", interval=600, unit=feed_unit
    )
    body = {"node": office.pk, "name": f"m{Meter.objects.count()}", "fuel": fuel,
            "source": source, "feed": feed.pk, **extra}  # fmt: skip
    return api.post(f"{API}/meters", body, format="json")


@pytest.mark.parametrize(
    ("fuel", "source", "unit"),
    [("electricity", "cumulative", "°C"), ("electricity", "cumulative", "W"),
     ("gas", "cumulative", "m³"), ("electricity", "power", "kWh"), ("generation", "power", "°C"),
     ("water", "cumulative", "kWh"), ("heat", "cumulative", "g/kWh")],
)  # fmt: skip
def test_a_feed_whose_unit_does_not_fit_is_refused_naming_feed(
    engineer_api, office, fuel, source, unit
):
    r = _post(engineer_api, office, fuel, source, unit)
    assert r.status_code == 400, r.content
    assert (
        f"is in {unit!r}: a {source} {fuel} meter reads a feed in" in r.json()["fields"]["feed"][0]
    )
    assert not Meter.objects.exists()


@pytest.mark.parametrize(
    ("fuel", "source", "unit"),
    [("electricity", "cumulative", "kWh"), ("electricity", "cumulative", "Wh"),
     ("gas", "cumulative", "kwh"), ("electricity", "cumulative", ""), ("electricity", "power", "W"),
     ("generation", "power", "kW"), ("water", "cumulative", "m³"), ("water", "cumulative", "m3")],
)  # fmt: skip
def test_a_feed_in_a_fitting_unit_or_none_is_accepted(engineer_api, office, fuel, source, unit):
    assert _post(engineer_api, office, fuel, source, unit).status_code == 201


def test_the_admin_refuses_the_same_through_the_models_clean(office):
    feed = Feed.objects.create(name="outside", tag="weather", interval=600, unit="°C")
    meter = Meter(node=office, name="Elec", fuel="electricity", source="cumulative", feed=feed)
    with pytest.raises(ValidationError) as exc:
        meter.full_clean()
    assert (
        "a cumulative electricity meter reads a feed in kWh or Wh"
        in exc.value.message_dict["feed"][0]
    )


def test_a_unit_that_disagrees_with_the_fuel_is_refused_naming_unit(engineer_api, office):
    r = _post(engineer_api, office, "water", "cumulative", "m³", unit="kWh")
    assert r.status_code == 400
    assert r.json()["fields"]["unit"] == [
        "'kWh': a water meter counts in m³ (the unit follows from the fuel)"
    ]
    ok = _post(engineer_api, office, "water", "cumulative", "m³", unit="m3")
    assert ok.status_code == 201 and ok.json()["unit"] == "m³"
    # a change of fuel that no longer fits the given unit, on update
    r = engineer_api.patch(f"{API}/meters/{ok.json()['id']}", {"unit": "kWh"}, format="json")
    assert r.status_code == 400 and "unit" in r.json()["fields"]


def test_a_register_in_wh_and_power_in_kw_give_the_same_kwh(office, redis_client):
    tz = ZoneInfo("Europe/London")
    start = int(datetime(2024, 6, 1, tzinfo=tz).timestamp())
    times = np.arange(start - 86400, start + 2 * 86400 + 1, 600)
    # 2 kW steady: 2 kWh an hour, 48 kWh a day
    registers = {"kWh": [(t - times[0]) / 3600 * 2 for t in times]}
    registers["Wh"] = [v * 1000 for v in registers["kWh"]]
    powers = {"W": [2000.0] * len(times), "kW": [2.0] * len(times)}
    meters = []
    for unit, values in registers.items():
        feed = Feed.objects.create(name=f"reg {unit}", tag="t", interval=600, unit=unit)
        phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, 600, times.tolist(), values, now=NOW)
        meters.append(Meter.objects.create(node=office, name=f"reg {unit}", fuel="electricity",
                                           source="cumulative", feed=feed))  # fmt: skip
    for unit, values in powers.items():
        feed = Feed.objects.create(name=f"pow {unit}", tag="t", interval=600, unit=unit)
        phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, 600, times.tolist(), values, now=NOW)
        meters.append(Meter.objects.create(node=office, name=f"pow {unit}", fuel="electricity",
                                           source="power", feed=feed, counts_to_node=False))  # fmt: skip
    refresh.refresh(Meter.objects.select_related("feed", "node__site"), date(2024, 6, 1),
                    date(2024, 6, 1), now=NOW)  # fmt: skip
    got = {m.name: MeterDay.objects.get(meter=m, day=date(2024, 6, 1)).value for m in meters}
    assert got == pytest.approx({"reg kWh": 48.0, "reg Wh": 48.0, "pow W": 48.0, "pow kW": 48.0})


def test_a_generator_or_flow_feed_on_the_wrong_meter_is_refused_naming_the_field(
    engineer_api, office
):
    flow = Feed.objects.create(name="river", tag="t", interval=600, unit="l/s")
    r = _post(engineer_api, office, "electricity", "power", "W", generator="pv")
    assert r.status_code == 400 and "generator" in r.json()["fields"], r.content
    r = _post(engineer_api, office, "generation", "power", "W", generator="pv", flow_feed=flow.pk)
    assert r.status_code == 400 and list(r.json()["fields"]) == ["flow_feed"], r.content
    r = _post(engineer_api, office, "generation", "power", "W", generator="tidal")
    assert r.status_code == 400 and "generator" in r.json()["fields"], r.content
    r = _post(
        engineer_api, office, "generation", "power", "W", generator="hydro", flow_feed=flow.pk
    )
    assert r.status_code == 201, r.content
    assert (r.json()["generator"], r.json()["flow_feed"]) == ("hydro", flow.pk)
