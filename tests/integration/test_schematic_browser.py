"""Plant schematics in real headless Chromium: a heating plant and a solar circuit drawn
from their configuration, with states from a real control tick against a real Modbus relay
board; clicking an element shows why it is in its state and its recent commands; the drawing
updates in place."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from control.drivers.simulated_board import RelayBoard
from control.models import Booking, HeatingPlant, SolarCircuit
from control.runner import run_tick
from core.roles import ENGINEERS
from feeds.store import service
from sensors.models import Actuator
from tests.control import factories as f
from tests.integration import test_staff_browser as _base
from tests.integration.test_staff_ux_browser import in_thread

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

server, page = _base.server, _base.page
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture
def board() -> Iterator[RelayBoard]:
    with RelayBoard(coils=32) as b:
        yield b


@pytest.fixture
def site_data(redis_client, board) -> dict:
    user = User.objects.create_user("estates", password=_base.PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    valve = f.relay("Hall valve", board, coil=0)
    library_valve = f.relay("Library valve", board, coil=1)
    boiler = f.relay("Boiler", board, coil=10, kind="boiler")
    pump = f.relay("Pump", board, coil=11, kind="pump")
    hall = f.zone("Hall", valve, temp=15.0)
    library = f.zone("Library", library_valve, temp=19.5)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler, pump=pump)
    plant.zones.add(hall, library)
    now = timezone.now()
    Booking.objects.create(zone=hall, title="Yoga", start=now - timedelta(minutes=1),
                           end=now + timedelta(hours=1))  # fmt: skip
    collector = f.temperature_sensor("Collector")
    tank = f.temperature_sensor("Tank")
    service.log_points([(collector.feed_id, int(now.timestamp()), 58.0),
                        (tank.feed_id, int(now.timestamp()), 41.5)])  # fmt: skip
    solar_pump = Actuator.objects.create(name="Solar pump", kind="pump", host=board.host,
                                         port=board.port, coil=12, min_on_s=0, min_off_s=0)  # fmt: skip
    solar = SolarCircuit.objects.create(name="Roof solar", collector_sensor=collector,
                                        tank_sensor=tank, pump=solar_pump)  # fmt: skip
    run_tick(now)
    run_tick(now + timedelta(seconds=30))  # the boiler fires once the valve confirmed open
    assert board.coils_state(10, 2) == [True, True]
    return {"plant": plant.pk, "solar": solar.pk, "valve": valve.pk, "hall": hall,
            "solar_pump": solar_pump.pk, "boiler": boiler.pk}  # fmt: skip


def test_heating_plant_schematic_shows_states_and_why(page, server, site_data, settings):
    settings.BMS_STAFF_LIVE_S = 1
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1280, "height": 800})
    browser_page.goto(server.url + "/staff/control/")
    browser_page.get_by_role("link", name="Boiler house").click()
    browser_page.wait_for_url(f"**/staff/control/plant/{site_data['plant']}/")
    boiler = browser_page.locator(f"#el-actuator-{site_data['boiler']}")
    expect(boiler).to_contain_text("Boiler ON")
    expect(boiler).to_have_class("el boiler on")
    hall = browser_page.locator(f"#el-zone-{site_data['hall'].pk}")
    expect(hall).to_contain_text("Hall")
    expect(hall).to_contain_text("15.0 °C")
    valve = browser_page.locator(f"#el-actuator-{site_data['valve']}")
    expect(valve).to_contain_text("ON")
    valve.click()
    panel = browser_page.locator("#why-body")
    expect(panel).to_contain_text("Hall valve")
    expect(panel.locator(".why")).to_contain_text("Yoga")  # the booking that opened it
    command = panel.locator("table.commands tbody tr").first
    expect(command).to_contain_text("ON")
    expect(command).to_contain_text("Yoga")
    browser_page.screenshot(path=str(IMG / "staff-schematic-plant.png"))

    # The room warms: the next tick and the next live update show it, in place, panel open.
    def warmer():
        f.set_temperature(site_data["hall"], 21.3)
        run_tick()

    valve.focus()
    in_thread(warmer)
    expect(hall).to_contain_text("21.3 °C")
    expect(panel).to_contain_text("Hall valve")
    # keyboard focus stays on the element after the live update replaced the drawing
    assert browser_page.evaluate("document.activeElement.id") == f"el-actuator-{site_data['valve']}"
    assert browser_page.url.endswith(f"/staff/control/plant/{site_data['plant']}/")
    assert seen["errors"] == []


def test_solar_schematic_shows_temperatures_and_the_pump(page, server, site_data):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1280, "height": 800})
    browser_page.goto(f"{server.url}/staff/control/solar/{site_data['solar']}/")
    expect(browser_page.locator("#el-collector")).to_contain_text("58.0 °C")
    expect(browser_page.locator("#el-tank")).to_contain_text("41.5 °C")
    expect(browser_page.locator("#solar-delta")).to_contain_text("Δt 16.5 K")
    pump = browser_page.locator(f"#el-actuator-{site_data['solar_pump']}")
    expect(pump).to_contain_text("ON")
    pump.click()
    expect(browser_page.locator("#why-body .why")).not_to_be_empty()
    expect(browser_page.locator("#why-body table.commands tbody tr")).to_have_count(1)
    browser_page.screenshot(path=str(IMG / "staff-schematic-solar.png"))
    assert seen["errors"] == []


def test_schematic_at_phone_width_and_for_a_viewer(page, server, site_data):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 390, "height": 800})
    browser_page.goto(f"{server.url}/staff/control/plant/{site_data['plant']}/")
    assert browser_page.evaluate("document.documentElement.scrollWidth") <= 390
    assert browser_page.goto(f"{server.url}/staff/control/plant/999999/").status == 404
    assert seen["errors"] == [] or all("404" in e for e in seen["errors"])


OVERLAPS_JS = """() => {
  const boxes = [...document.querySelectorAll('svg.schematic g.el')].map(g => {
    const parts = [...g.querySelectorAll('text, rect:not(.hit), circle, polygon')];
    return parts.map(p => { const b = p.getBoundingClientRect();
      return {id: g.id, tag: p.tagName, l: b.left, r: b.right, t: b.top, b: b.bottom}; });
  });
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++)
    for (const a of boxes[i]) for (const c of boxes[j])
      if (a.l < c.r - 1 && c.l < a.r - 1 && a.t < c.b - 1 && c.t < a.b - 1) hits.push([a.id, c.id]);
  return hits;
}"""


def test_long_names_do_not_overlap_and_a_phone_scrolls_the_drawing_not_the_page(
    page, server, site_data
):
    """An outside tester saw four valve names printed over each other and the pump's name over
    the boiler (names as long as a real site's)."""

    def rename() -> None:  # the ORM from a thread: playwright's loop runs in this one
        Actuator.objects.filter(pk=site_data["valve"]).update(name="Lecture theatre radiator valve")
        Actuator.objects.filter(name="Library valve").update(name="Seminar room radiator valve")
        Actuator.objects.filter(name="Pump").update(name="Boiler house circulation pump")

    in_thread(rename)
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1280, "height": 800})
    browser_page.goto(f"{server.url}/staff/control/plant/{site_data['plant']}/")
    expect(browser_page.locator(f"#el-actuator-{site_data['valve']} title")).to_have_text(
        "Lecture theatre radiator valve"
    )  # the full name is still there (tooltip), and in the side panel on click
    assert browser_page.evaluate(OVERLAPS_JS) == []
    browser_page.set_viewport_size({"width": 390, "height": 800})
    browser_page.reload()
    assert browser_page.evaluate("document.documentElement.scrollWidth") <= 390
    width = browser_page.evaluate(
        "document.querySelector('svg.schematic').getBoundingClientRect().width"
    )
    assert width >= 560  # readable: the card scrolls, the drawing is not shrunk to a stamp
    assert seen["errors"] == []


INSIDE_OWN_BOX_JS = """() => {
  const out = [];
  for (const g of document.querySelectorAll('svg.schematic g.el.zone, g.el.boiler, g.el.tank')) {
    const box = g.querySelector('rect:not(.hit)').getBoundingClientRect();
    for (const t of g.querySelectorAll('text')) {
      const b = t.getBoundingClientRect();
      if (b.width && (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1
          || b.bottom > box.bottom + 1)) out.push([g.id, t.textContent]);
    }
  }
  const svg = document.querySelector('svg.schematic').getBoundingClientRect();
  for (const g of document.querySelectorAll('svg.schematic g.el')) {
    const b = g.getBoundingClientRect();
    if (b.left < svg.left - 1 || b.right > svg.right + 1 || b.top < svg.top - 1
        || b.bottom > svg.bottom + 1) out.push([g.id, 'outside the drawing']);
  }
  return out;
}"""


@pytest.fixture
def heat_main_data(site_data, board) -> dict:
    """A heat main like the demo's: two sources, a buffer store with its pumps and four rooms,
    one of them warming up early for a booking (the tester's overlapping drawing, #27)."""
    from control.models import HeatMain, HeatSource, ThermalStore

    zones = [f.zone(name, f.relay(f"{name} valve", board, coil=20 + i), temp=15.0)
             for i, name in enumerate(("Lecture theatre", "Seminar room", "Workshop",
                                       "Straw bale room"))]  # fmt: skip
    now = timezone.now()
    Booking.objects.create(zone=zones[0], title="Course", start=now + timedelta(minutes=40),
                           end=now + timedelta(hours=3))  # fmt: skip
    flow, top, bottom = (
        f.temperature_sensor(n) for n in ("Main flow", "Store top", "Store bottom")
    )
    service.log_points([(flow.feed_id, int(now.timestamp()), 61.0),
                        (top.feed_id, int(now.timestamp()), 52.0),
                        (bottom.feed_id, int(now.timestamp()), 41.2)])  # fmt: skip
    main = HeatMain.objects.create(name="Site heat main", flow_sensor=flow)
    main.zones.set(zones)
    for order, name in enumerate(("Biomass boiler", "Gas boiler 2")):
        HeatSource.objects.create(heat_main=main, name=name, order=order,
                                  actuator=f.relay(name, board, coil=24 + order, kind="boiler"))  # fmt: skip
    charge = f.relay("Store charge pump", board, coil=26, kind="pump")
    ThermalStore.objects.create(heat_main=main, name="Buffer store", top_sensor=top,
                                bottom_sensor=bottom, charge_pump=charge,
                                discharge_pump=f.relay("Store discharge pump", board, coil=27,
                                                       kind="pump"))  # fmt: skip
    run_tick(now)
    run_tick(now + timedelta(seconds=30))
    return {"main": main.pk, "lecture": zones[0].pk, "charge": charge.pk}


def test_heat_main_drawing_keeps_boxes_apart_and_the_store_says_top_bottom_and_charging(
    heat_main_data, page, server
):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1280, "height": 800})
    browser_page.goto(f"{server.url}/staff/control/heat-main/{heat_main_data['main']}/")
    lecture = browser_page.locator(f"#el-zone-{heat_main_data['lecture']}")
    expect(lecture).to_contain_text("warming up early")
    expect(lecture).to_contain_text("target 20.0 °C")
    assert browser_page.evaluate(OVERLAPS_JS) == []
    assert browser_page.evaluate(INSIDE_OWN_BOX_JS) == []
    expect(browser_page.locator(f"#el-actuator-{heat_main_data['charge']}")).to_be_visible()
    store = browser_page.locator("#el-store")
    expect(store).to_contain_text("52.0 °C")
    expect(store).to_contain_text("41.2 °C")
    store.click()
    panel = browser_page.locator("#why-body")
    expect(panel).to_contain_text("Top 52.0 °C, bottom 41.2 °C: charging")
    expect(panel).to_contain_text("Store charge pump:")
    assert seen["errors"] == []
