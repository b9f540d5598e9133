"""Authorization matrix: every URL pattern of the site x every kind of caller, from both sides.

Callers: anonymous, node A's key, node B's key (another node), viewer, booker, engineer,
superuser. Each matrix row names a URL pattern, a request and the callers allowed. Allowed
callers get their 2xx/3xx (for a write with a deliberately empty body: the 400 of validation,
which proves the permission check passed); reads share one world, each write row gets a fresh one; every other caller gets 401/403/404 (or, for staff
pages, a redirect to the login page) and no data: nothing named HIDDEN in the answer.

The list of patterns comes from the URL resolver: a new endpoint without a row fails
test_every_url_pattern_has_a_matrix_row. Admin pages are checked per registered model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from core.roles import OUR_APPS
from tests.security.conftest import HIDDEN, World
from tests.wsgi_client import WsgiClient as Client

ANON, NODE, OTHER_NODE = "anonymous", "node key", "other node's key"
VIEWER, BOOKER, ENGINEER, SUPER = "viewer", "booker", "engineer", "superuser"
CALLERS = (ANON, NODE, OTHER_NODE, VIEWER, BOOKER, ENGINEER, SUPER)
EVERYONE = frozenset(CALLERS)
STAFF = frozenset({VIEWER, BOOKER, ENGINEER, SUPER})
WRITERS = frozenset({ENGINEER, SUPER})
BOOKERS = frozenset({BOOKER, ENGINEER, SUPER})
NODE_ONLY = frozenset({NODE})
NOT_NODES = EVERYONE - {NODE, OTHER_NODE}
OK = frozenset(range(200, 400))
VALIDATION = frozenset({400})  # an empty body that got past the permission check
T0, T1 = "1700000000", "1700086400"


@dataclass(frozen=True)
class Row:
    pattern: str
    method: str
    path: Callable[[World], str]
    allowed: frozenset[str]
    ok: frozenset[int] = OK
    body: Callable[[World], dict] | None = None
    form: bool = False  # a form post (staff pages, emoncms) instead of JSON
    filtered: bool = False  # everyone may ask; only staff may see HIDDEN things in it

    def id(self) -> str:
        return f"{self.method} {self.pattern}"


def _api(resource: str, key: str, *, write: frozenset[str] = WRITERS, crud: bool = True):
    """Rows of a DRF router resource: list, detail, and (for CRUD) create and update."""
    lst, det = f"api/v1/^{resource}/?$", f"api/v1/^{resource}/(?P<pk>[^/.]+)/?$"
    rows = [
        Row(lst, "GET", lambda w: f"/api/v1/{resource}", STAFF),
        Row(det, "GET", lambda w: f"/api/v1/{resource}/{w.ids[key]}", STAFF),
    ]
    if crud:
        rows += [
            Row(lst, "POST", lambda w: f"/api/v1/{resource}", write, VALIDATION, lambda w: {}),
            Row(det, "PATCH", lambda w: f"/api/v1/{resource}/{w.ids[key]}", write,
                frozenset({200}) | VALIDATION, lambda w: {}),
        ]  # fmt: skip
    return rows


def _aside_now(w: World) -> str:
    """The newest request of node A still set aside (a retry takes one away)."""
    from core.redis import get_redis
    from sensors.ingest.set_aside import ASIDE_PREFIX

    newest = get_redis().xrevrange(f"{ASIDE_PREFIX}{w.ids['node-a']}", count=1)
    return newest[0][0].decode() if newest else w.slugs["aside"]


def _commands(w: World, suffix: str = "") -> str:
    return f"/api/v1/nodes/{w.ids['node-a']}/commands{suffix}"


def _ack(w: World, suffix: str = "") -> str:
    return f"/api/v1/nodes/{w.ids['node-a']}/commands/{w.ids['node_command']}/ack{suffix}"


def _data(w: World, param: str = "id") -> str:
    return f"?{param}={w.ids['private_feed']}&start={T0}&end={T1}"


READING = {"node": "node-a", "values": {"power": 1.5}}
BULK = {"data": json.dumps([[0, "node-a", 1]])}

ROWS: list[Row] = [
    Row("healthz", "GET", lambda w: "/healthz", EVERYONE, frozenset({200, 503})),
    Row("api/schema/", "GET", lambda w: "/api/schema/", EVERYONE),
    Row("api/docs/", "GET", lambda w: "/api/docs/", EVERYONE),
    Row("api/v1/feeds/data", "GET", lambda w: "/api/v1/feeds/data" + _data(w, "ids"), STAFF),
    Row("api/v1/feeds/<int:pk>/data", "GET",
        lambda w: f"/api/v1/feeds/{w.ids['private_feed']}/data?start={T0}&end={T1}", STAFF),
    Row("api/v1/feeds/<int:pk>/timevalue", "GET",
        lambda w: f"/api/v1/feeds/{w.ids['private_feed']}/timevalue", STAFF),
    *_api("feeds", "private_feed"),
    Row("api/v1/^readings/?$", "POST", lambda w: "/api/v1/readings", NODE_ONLY,
        frozenset({202}), lambda w: READING),
    *_api("sites", "site"),
    Row("api/v1/^sites/(?P<pk>[^/.]+)/history-budget/?$", "GET",
        lambda w: f"/api/v1/sites/{w.ids['site']}/history-budget", STAFF),
    *_api("nodes", "node-a"),
    Row("api/v1/^nodes/(?P<pk>[^/.]+)/input-errors/?$", "GET",
        lambda w: f"/api/v1/nodes/{w.ids['node-a']}/input-errors", STAFF),
    Row("api/v1/set-aside", "GET", lambda w: "/api/v1/set-aside", STAFF),
    # Each allowed caller retries one (the world has two): the one still set aside.
    Row("api/v1/set-aside/<int:node_pk>/<str:entry>/retry", "POST",
        lambda w: f"/api/v1/set-aside/{w.ids['node-a']}/{_aside_now(w)}/retry", WRITERS),
    Row("api/v1/set-aside/<int:node_pk>/<str:entry>/discard", "POST",
        lambda w: f"/api/v1/set-aside/{w.ids['node-a']}/{w.slugs['aside']}/discard", WRITERS,
        VALIDATION, lambda w: {}),
    Row("api/v1/^nodes/(?P<pk>[^/.]+)/rotate-key/?$", "POST",
        lambda w: f"/api/v1/nodes/{w.ids['node-b']}/rotate-key", WRITERS),
    *_api("sensors", "sensor"),
    *_api("modbus-registers", "register"),
    *_api("modbus-buses", "bus"),
    Row("api/v1/^modbus-register-maps/?$", "GET", lambda w: "/api/v1/modbus-register-maps",
        STAFF),
    Row("api/v1/^nodes/(?P<pk>[^/.]+)/register-map/?$", "POST",
        lambda w: f"/api/v1/nodes/{w.ids['node-b']}/register-map", WRITERS, VALIDATION,
        lambda w: {}),
    *_api("actuators", "actuator"),
    *_api("bacnet-devices", "bacnet_device"),
    *_api("bacnet-points", "bacnet_point"),
    Row("api/v1/^bacnet-devices/(?P<pk>[^/.]+)/last-read/?$", "GET",
        lambda w: f"/api/v1/bacnet-devices/{w.ids['bacnet_device']}/last-read", STAFF),
    *_api("alarms", "alarm", crud=False),
    *_api("findings", "finding", crud=False),
    Row("api/v1/^findings/(?P<pk>[^/.]+)/?$", "PATCH",
        lambda w: f"/api/v1/findings/{w.ids['finding']}", WRITERS, VALIDATION, lambda w: {}),
    # the site's Brick model (docs/BRICK.md): every name and feed of the site, staff only
    Row("api/v1/brick.ttl", "GET", lambda w: "/api/v1/brick.ttl", STAFF),
    Row("api/v1/^alarms/(?P<pk>[^/.]+)/acknowledge/?$", "POST",
        lambda w: f"/api/v1/alarms/{w.ids['alarm']}/acknowledge", WRITERS),
    *_api("zones", "zone"),
    *_api("schedules", "schedule"),
    *_api("schedule-periods", "period"),
    *_api("schedule-exceptions", "exception"),
    *_api("bookings", "booking", write=BOOKERS),
    *_api("overrides", "override"),
    *_api("actuator-commands", "command", crud=False),
    *_api("weather-compensations", "weather"),
    *_api("relay-boards", "relay_board"),
    *_api("heating-plants", "plant"),
    *_api("solar-circuits", "solar"),
    *_api("heat-mains", "heat_main"),
    *_api("heat-sources", "heat_source"),
    *_api("thermal-stores", "thermal_store"),
    *_api("analogue-commands", "analogue_command", crud=False),
    *_api("output-overrides", "output_override"),
    Row("api/v1/^output-overrides/(?P<pk>[^/.]+)/?$", "DELETE",
        lambda w: f"/api/v1/output-overrides/{w.ids['output_override']}", WRITERS),
    Row("api/v1/nodes/<int:node_id>/commands", "GET", _commands, NODE_ONLY),
    Row("api/v1/nodes/<int:node_id>/commands/", "GET", lambda w: _commands(w, "/"), NODE_ONLY),
    Row("api/v1/nodes/<int:node_id>/commands/<int:command_id>/ack", "POST", _ack, NODE_ONLY,
        body=lambda w: {"ok": True}),
    Row("api/v1/nodes/<int:node_id>/commands/<int:command_id>/ack/", "POST",
        lambda w: _ack(w, "/"), NODE_ONLY, body=lambda w: {"ok": True}),
    Row("api/v1/control/status", "GET", lambda w: "/api/v1/control/status", STAFF),
    *_api("displays", "display"),
    *_api("panels", "panel"),
    # A node key sent as Bearer on /feed/* is a wrong read key: 401, as a wrong apikey= is.
    Row("feed/list.json", "GET", lambda w: "/feed/list.json", NOT_NODES, filtered=True),
    Row("feed/timevalue.json", "GET",
        lambda w: f"/feed/timevalue.json?id={w.ids['private_feed']}", STAFF),
    Row("feed/data.json", "GET", lambda w: "/feed/data.json" + _data(w), STAFF),
    Row("feed/csvexport.json", "GET", lambda w: "/feed/csvexport.json" + _data(w), STAFF),
    Row("feed/value.json", "GET", lambda w: f"/feed/value.json?id={w.ids['private_feed']}",
        STAFF),
    Row("feed/fetch.json", "GET",
        lambda w: f"/feed/fetch.json?ids={w.ids['public_feed']},{w.ids['private_feed']}",
        NOT_NODES, filtered=True),
    Row("feed/export.json", "GET", lambda w: f"/feed/export.json?id={w.ids['private_feed']}",
        STAFF),
    # emoncms's other paths (docs/MOVING_FROM_EMONCMS.md#the-emoncms-api-here): any staff
    # role reads, engineers write; node keys are device keys, refused as wrong read keys.
    Row("describe", "GET", lambda w: "/describe", EVERYONE),
    Row("version", "GET", lambda w: "/version", EVERYONE),
    Row("user/auth.json", "POST", lambda w: "/user/auth.json", EVERYONE, VALIDATION,
        lambda w: {}, form=True),
    Row("feed/average.json", "GET", lambda w: "/feed/average.json" + _data(w), STAFF),
    Row("feed/getmeta.json", "GET",
        lambda w: f"/feed/getmeta.json?id={w.ids['private_feed']}", STAFF),
    Row("feed/get.json", "GET",
        lambda w: f"/feed/get.json?id={w.ids['private_feed']}&field=name", STAFF),
    Row("feed/aget.json", "GET", lambda w: f"/feed/aget.json?id={w.ids['private_feed']}", STAFF),
    Row("feed/buffersize.json", "GET", lambda w: "/feed/buffersize.json", WRITERS),
    Row("feed/create.json", "GET", lambda w: "/feed/create.json", WRITERS, VALIDATION),
    Row("feed/insert.json", "GET", lambda w: f"/feed/insert.json?id={w.ids['private_feed']}",
        WRITERS, VALIDATION),
    Row("feed/post.json", "GET", lambda w: f"/feed/post.json?id={w.ids['private_feed']}",
        WRITERS, VALIDATION),
    Row("input/list.json", "GET", lambda w: "/input/list.json", STAFF),
    Row("input/list", "GET", lambda w: "/input/list", STAFF),
    Row("input/getinputs.json", "GET", lambda w: "/input/getinputs.json", STAFF),
    Row("input/get.json", "GET", lambda w: "/input/get.json", STAFF),
    Row("input/get", "GET", lambda w: "/input/get", STAFF),
    Row("input/get/<str:node>", "GET", lambda w: "/input/get/node-a", STAFF),
    Row("input/get/<str:node>/<str:name>", "GET", lambda w: "/input/get/node-a/hidden_power",
        STAFF),
    Row("input/get/<str:site>/<str:node>/<str:name>", "GET",
        lambda w: "/input/get/hidden-site/node-a/hidden_power", STAFF),
    Row("input/process/get.json", "GET",
        lambda w: f"/input/process/get.json?inputid={w.ids['sensor']}", WRITERS),
    Row("input/process/set.json", "POST",
        lambda w: f"/input/process/set.json?inputid={w.ids['sensor']}", WRITERS, VALIDATION,
        lambda w: {}, form=True),
    Row("input/post", "GET", lambda w: "/input/post?node=node-a&json=power:1", NODE_ONLY),
    Row("input/post.json", "GET", lambda w: "/input/post.json?node=node-a&json=power:1",
        NODE_ONLY),
    Row("input/bulk", "POST", lambda w: "/input/bulk", NODE_ONLY, body=lambda w: BULK, form=True),
    Row("input/bulk.json", "POST", lambda w: "/input/bulk.json", NODE_ONLY, body=lambda w: BULK,
        form=True),
    Row("staff/control/", "GET", lambda w: "/staff/control/", STAFF),
    Row("staff/control/overrides/", "POST", lambda w: "/staff/control/overrides/", WRITERS,
        OK | VALIDATION, lambda w: {}, form=True),
    Row("staff/control/overrides/<int:pk>/cancel/", "POST",
        lambda w: f"/staff/control/overrides/{w.ids['override']}/cancel/", WRITERS, form=True),
    Row("staff/control/output-overrides/", "POST", lambda w: "/staff/control/output-overrides/",
        WRITERS, OK | VALIDATION, lambda w: {}, form=True),
    Row("staff/control/output-overrides/<int:pk>/cancel/", "POST",
        lambda w: f"/staff/control/output-overrides/{w.ids['output_override']}/cancel/", WRITERS,
        form=True),
    Row("staff/control/replay/<slug:zone_slug>/", "GET",
        lambda w: f"/staff/control/replay/{w.slugs['zone']}/", WRITERS),
    Row("staff/control/plant/<int:pk>/", "GET",
        lambda w: f"/staff/control/plant/{w.ids['plant']}/", STAFF),
    Row("staff/control/solar/<int:pk>/", "GET",
        lambda w: f"/staff/control/solar/{w.ids['solar']}/", STAFF),
    Row("staff/control/heat-main/<int:pk>/", "GET",
        lambda w: f"/staff/control/heat-main/{w.ids['heat_main']}/", STAFF),
    Row("staff/bookings/", "GET", lambda w: "/staff/bookings/", STAFF),
    Row("staff/bookings/<slug:zone_slug>/", "GET",
        lambda w: f"/staff/bookings/{w.slugs['zone']}/", STAFF),
    Row("staff/bookings/<slug:zone_slug>/<int:pk>/", "GET",
        lambda w: f"/staff/bookings/{w.slugs['zone']}/{w.ids['booking']}/", BOOKERS),
    Row("staff/bookings/<slug:zone_slug>/<int:pk>/cancel/", "POST",
        lambda w: f"/staff/bookings/{w.slugs['zone']}/{w.ids['booking']}/cancel/", BOOKERS,
        form=True),
    Row("staff/bookings/<slug:zone_slug>/<int:pk>/restore/", "POST",
        lambda w: f"/staff/bookings/{w.slugs['zone']}/{w.ids['cancelled']}/restore/", BOOKERS,
        form=True),
    # schedules, site calendars and rooms in buildings (docs/CONTROL.md): staff read, engineers
    # change (an empty form is re-shown with its errors: past the permission check)
    Row("staff/schedules/", "GET", lambda w: "/staff/schedules/", STAFF),
    Row("staff/schedules/new/", "GET", lambda w: "/staff/schedules/new/", WRITERS),
    Row("staff/schedules/new/", "POST", lambda w: "/staff/schedules/new/", WRITERS, VALIDATION,
        form=True),
    Row("staff/schedules/<int:pk>/", "GET",
        lambda w: f"/staff/schedules/{w.ids['schedule']}/", STAFF),
    Row("staff/schedules/<int:pk>/", "POST",
        lambda w: f"/staff/schedules/{w.ids['schedule']}/", WRITERS, VALIDATION, form=True),
    Row("staff/schedules/rooms/", "GET", lambda w: "/staff/schedules/rooms/", STAFF),
    Row("staff/schedules/rooms/", "POST", lambda w: "/staff/schedules/rooms/", WRITERS,
        VALIDATION, form=True),
    # heating plants (with weather compensation) and solar circuits: staff read, engineers
    # change (an empty form is re-shown with its errors: past the permission check)
    Row("staff/plants/", "GET", lambda w: "/staff/plants/", STAFF),
    Row("staff/plants/new/", "GET", lambda w: "/staff/plants/new/", WRITERS),
    Row("staff/plants/new/", "POST", lambda w: "/staff/plants/new/", WRITERS, VALIDATION,
        form=True),
    Row("staff/plants/<int:pk>/", "GET", lambda w: f"/staff/plants/{w.ids['plant']}/", STAFF),
    Row("staff/plants/<int:pk>/", "POST", lambda w: f"/staff/plants/{w.ids['plant']}/",
        WRITERS, VALIDATION, form=True),
    Row("staff/plants/solar/new/", "GET", lambda w: "/staff/plants/solar/new/", WRITERS),
    Row("staff/plants/solar/new/", "POST", lambda w: "/staff/plants/solar/new/", WRITERS,
        VALIDATION, form=True),
    Row("staff/plants/solar/<int:pk>/", "GET",
        lambda w: f"/staff/plants/solar/{w.ids['solar']}/", STAFF),
    Row("staff/plants/solar/<int:pk>/", "POST",
        lambda w: f"/staff/plants/solar/{w.ids['solar']}/", WRITERS, VALIDATION, form=True),
    Row("staff/calendars/", "GET", lambda w: "/staff/calendars/", STAFF),
    Row("staff/calendars/", "POST", lambda w: "/staff/calendars/", WRITERS, VALIDATION,
        form=True),
    Row("staff/calendars/<int:pk>/", "GET",
        lambda w: f"/staff/calendars/{w.ids['site_calendar']}/", STAFF),
    Row("staff/calendars/<int:pk>/", "POST",
        lambda w: f"/staff/calendars/{w.ids['site_calendar']}/", WRITERS, VALIDATION,
        form=True),
    Row("staff/calendars/<int:pk>/entries/<int:entry_pk>/delete/", "POST",
        lambda w: f"/staff/calendars/{w.ids['site_calendar']}/entries/"
        f"{w.ids['calendar_entry']}/delete/", WRITERS, form=True),
    Row("kiosk/", "GET", lambda w: "/kiosk/", EVERYONE, filtered=True),
    Row("kiosk/<slug:slug>/", "GET", lambda w: f"/kiosk/{w.slugs['private_display']}/", STAFF),
    Row("kiosk/<slug:slug>/data.json", "GET",
        lambda w: f"/kiosk/{w.slugs['private_display']}/data.json", STAFF),
    Row("", "GET", lambda w: "/", EVERYONE),
    Row("favicon.ico", "GET", lambda w: "/favicon.ico", EVERYONE),
    Row("staff/", "GET", lambda w: "/staff/", STAFF),
    Row("staff/feeds/", "GET", lambda w: "/staff/feeds/", STAFF),
    Row("staff/feeds/export.csv", "GET",
        lambda w: f"/staff/feeds/export.csv?ids={w.ids['private_feed']}&start={T0}&end={T1}",
        STAFF),
    Row("staff/feeds/export.xlsx", "GET",
        lambda w: f"/staff/feeds/export.xlsx?ids={w.ids['private_feed']}&start={T0}&end={T1}",
        STAFF),
    Row("staff/help/<str:name>", "GET", lambda w: "/staff/help/alarms", STAFF),
    Row("staff/alarms/", "GET", lambda w: "/staff/alarms/", STAFF),
    # the inputs page and process-list editor (docs/FEEDS.md): staff read, engineers save
    Row("staff/inputs/", "GET", lambda w: "/staff/inputs/", STAFF),
    Row("staff/inputs/<int:pk>/processes/", "GET",
        lambda w: f"/staff/inputs/{w.ids['sensor']}/processes/", STAFF),
    Row("staff/inputs/<int:pk>/processes/save", "POST",
        lambda w: f"/staff/inputs/{w.ids['sensor']}/processes/save", WRITERS, VALIDATION,
        lambda w: {}),
    # requests set aside by the drain (docs/INGEST.md): staff read, engineers retry or discard
    # (a discard without its confirmation is refused: 400)
    Row("staff/inputs/set-aside/", "GET", lambda w: "/staff/inputs/set-aside/", STAFF),
    Row("staff/inputs/set-aside/<int:node_pk>/<str:entry>/retry", "POST",
        lambda w: f"/staff/inputs/set-aside/{w.ids['node-a']}/{w.slugs['aside']}/retry",
        WRITERS, form=True),
    Row("staff/inputs/set-aside/<int:node_pk>/<str:entry>/discard", "GET",
        lambda w: f"/staff/inputs/set-aside/{w.ids['node-a']}/{w.slugs['aside']}/discard",
        WRITERS),
    Row("staff/inputs/set-aside/<int:node_pk>/<str:entry>/discard", "POST",
        lambda w: f"/staff/inputs/set-aside/{w.ids['node-a']}/{w.slugs['aside']}/discard",
        WRITERS, VALIDATION, lambda w: {}, form=True),
    # findings (docs/FINDINGS.md): staff read, engineers mark; an empty form is refused (400)
    Row("staff/findings/", "GET", lambda w: "/staff/findings/", STAFF),
    Row("staff/findings/<int:pk>/evidence.json", "GET",
        lambda w: f"/staff/findings/{w.ids['finding']}/evidence.json", STAFF),
    Row("staff/findings/<int:pk>/state", "POST",
        lambda w: f"/staff/findings/{w.ids['finding']}/state", WRITERS, VALIDATION,
        lambda w: {}, form=True),
    # BACnet controllers (docs/BACNET.md): staff read, engineers change settings, queue a poll,
    # discover, browse and add
    Row("staff/bacnet/", "GET", lambda w: "/staff/bacnet/", STAFF),
    Row("staff/bacnet/<int:pk>/settings", "POST",
        lambda w: f"/staff/bacnet/{w.ids['bacnet_device']}/settings", WRITERS, OK | VALIDATION,
        lambda w: {"interval": "4"}, form=True),
    Row("staff/bacnet/<int:pk>/poll", "POST",
        lambda w: f"/staff/bacnet/{w.ids['bacnet_device']}/poll", WRITERS, form=True),
    Row("staff/bacnet/discover", "POST", lambda w: "/staff/bacnet/discover", WRITERS,
        OK | VALIDATION, lambda w: {"target": "not-an-address"}, form=True),
    Row("staff/bacnet/browse", "POST", lambda w: "/staff/bacnet/browse", WRITERS,
        VALIDATION, lambda w: {"address": "not-an-address", "instance": "1"}, form=True),
    Row("staff/bacnet/add", "POST", lambda w: "/staff/bacnet/add", WRITERS, VALIDATION,
        lambda w: {"address": "192.0.2.40", "instance": "1"}, form=True),
    # What our own BACnet device shows and accepts: engineers switch it (an empty form is a
    # 400 naming the field once past the permission check).
    Row("staff/bacnet/zones/<int:pk>/writes", "POST",
        lambda w: f"/staff/bacnet/zones/{w.ids['zone']}/writes", WRITERS, VALIDATION,
        lambda w: {}, form=True),
    Row("staff/bacnet/feeds/<int:pk>/export", "POST",
        lambda w: f"/staff/bacnet/feeds/{w.ids['private_feed']}/export", WRITERS, VALIDATION,
        lambda w: {}, form=True),
    Row("staff/alarms/<int:pk>/acknowledge", "POST",
        lambda w: f"/staff/alarms/{w.ids['alarm']}/acknowledge", WRITERS, form=True),
    Row("staff/alarms/acknowledge-all", "POST", lambda w: "/staff/alarms/acknowledge-all",
        WRITERS, OK | VALIDATION, lambda w: {}, form=True),
    # energy (docs/ENERGY.md): staff roles read, engineers write, bookers only read
    *_api("energy/nodes", "energy_node"),
    Row("api/v1/^energy/nodes/(?P<pk>[^/.]+)/consumption/?$", "GET",
        lambda w: f"/api/v1/energy/nodes/{w.ids['energy_node']}/consumption", STAFF),
    Row("api/v1/^energy/nodes/(?P<pk>[^/.]+)/performance/?$", "GET",
        lambda w: f"/api/v1/energy/nodes/{w.ids['energy_node']}/performance", STAFF),
    *_api("energy/meters", "meter"),
    *_api("energy/expected", "expected"),
    Row("api/v1/^energy/expected/upload/?$", "POST", lambda w: "/api/v1/energy/expected/upload",
        WRITERS, VALIDATION, lambda w: {}, form=True),
    *_api("energy/fuel-rates", "fuel_rate"),
    *_api("energy/sites", "energy_site"),
    *_api("energy/grid-carbon", "grid_carbon"),
    *_api("energy/report-recipients", "recipient"),
    Row("api/v1/^energy/nodes/(?P<pk>[^/.]+)/report.pdf/?$", "GET",
        lambda w: f"/api/v1/energy/nodes/{w.ids['energy_node']}/report.pdf?month=2031-01", STAFF),
    Row("api/v1/^energy/nodes/(?P<pk>[^/.]+)/report.csv/?$", "GET",
        lambda w: f"/api/v1/energy/nodes/{w.ids['energy_node']}/report.csv?month=2031-01", STAFF),
    Row("api/v1/energy/league", "GET", lambda w: f"/api/v1/energy/league?site={w.ids['site']}",
        STAFF),
    Row("api/v1/energy/refresh", "POST", lambda w: "/api/v1/energy/refresh", WRITERS,
        VALIDATION, lambda w: {}),
    Row("staff/energy/", "GET", lambda w: f"/staff/energy/?site={w.ids['site']}", STAFF),
    # an engineer's import of the site energy model: an empty form is refused on the page
    # (a message and a redirect), everyone else gets 403 or the login page
    Row("staff/energy/model/", "POST", lambda w: "/staff/energy/model/", WRITERS,
        body=lambda w: {}, form=True),
]  # fmt: skip


def _patterns(resolver: URLResolver, prefix: str = ""):
    for p in resolver.url_patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            if route == "admin/":
                continue  # admin pages: test_admin_pages
            yield from _patterns(p, route)
        elif isinstance(p, URLPattern):
            yield route


def test_every_url_pattern_has_a_matrix_row():
    covered = {row.pattern for row in ROWS}
    missing = [p for p in _patterns(get_resolver()) if p not in covered]
    assert not missing, f"URL patterns without an authorization matrix row: {missing}"
    stale = covered - set(_patterns(get_resolver()))
    assert not stale, f"matrix rows for patterns that no longer exist: {stale}"


def _client(caller: str, world: World) -> Client:
    client = Client()
    if caller == NODE:
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world.keys['node-a']}"
    elif caller == OTHER_NODE:
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world.keys['node-b']}"
    elif caller != ANON:
        username = {VIEWER: "viewer", BOOKER: "booker", ENGINEER: "engineer", SUPER: "root"}
        client.force_login(User.objects.get(username=username[caller]))
    return client


def _request(client: Client, row: Row, world: World):
    path = row.path(world)
    body = row.body(world) if row.body else None
    if row.method == "GET":
        return client.get(path)
    if row.form:
        return client.generic(
            row.method, path, _urlencode(body or {}), "application/x-www-form-urlencoded"
        )
    return client.generic(row.method, path, json.dumps(body or {}), "application/json")


def _urlencode(body: dict) -> str:
    from urllib.parse import urlencode

    return urlencode(body)


def _refused(response) -> bool:
    if response.status_code in (401, 403, 404):
        return True
    location = response.get("Location", "")
    return response.status_code == 302 and location.startswith(settings.LOGIN_URL)


def _content(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def _check_row(row: Row, world: World, clients: dict[str, Client]) -> list[str]:
    failures = []
    for caller in CALLERS:
        response = _request(clients[caller], row, world)
        body = _content(response)
        status = response.status_code
        if caller in row.allowed:
            if status not in row.ok or _refused(response):
                failures.append(
                    f"{row.id()}: {caller}: expected {sorted(row.ok)[:3]}, got {status}"
                )
            elif row.filtered and caller not in STAFF and HIDDEN.encode() in body:
                failures.append(f"{row.id()}: {caller}: answer shows private things")
        else:
            if not _refused(response):
                failures.append(
                    f"{row.id()}: {caller}: expected a refusal, got {status} {body[:120]!r}"
                )
            elif HIDDEN.encode() in body:
                failures.append(
                    f"{row.id()}: {caller}: refused, but the answer names private things"
                )
        if any(key.encode() in body for key in world.keys.values()):
            failures.append(f"{row.id()}: {caller}: a node key in the answer")
    return failures


def _clients(world: World) -> dict[str, Client]:
    return {caller: _client(caller, world) for caller in CALLERS}


def test_matrix_reads(world: World):
    """Every GET row with one world (reads change nothing): 7 callers x each row."""
    clients = _clients(world)
    failures = [f for row in ROWS if row.method == "GET" for f in _check_row(row, world, clients)]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("row", [r for r in ROWS if r.method != "GET"], ids=Row.id)
def test_matrix_writes(row: Row, world: World):
    """Each write row with a fresh world: an allowed write must not spoil the next caller's."""
    failures = _check_row(row, world, _clients(world))
    assert not failures, "\n".join(failures)


# --- admin -------------------------------------------------------------------------------------

ADMIN_MODELS = sorted((m._meta.app_label, m._meta.model_name) for m in admin.site._registry)


def _superuser_request():
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="root")
    return request


def _admin_allowed(app: str, model: str, page: str) -> frozenset[str]:
    model_admin = next(
        a for m, a in admin.site._registry.items()
        if (m._meta.app_label, m._meta.model_name) == (app, model)
    )  # fmt: skip
    if page == "add" and not model_admin.has_add_permission(_superuser_request()):
        return frozenset()  # audit logs and alarms are never added by hand, not even by root
    if app not in OUR_APPS:
        return frozenset({SUPER})  # users, groups, tokens: superusers only
    if page == "changelist":
        return STAFF  # every role has the view permission on our models
    if model == "booking":
        return BOOKERS
    return WRITERS


def test_admin_pages(world: World):
    """Every registered model's changelist and add page (GETs: one world for all)."""
    clients = _clients(world)
    failures = []
    for app, model in ADMIN_MODELS:
        for page in ("changelist", "add"):
            url = reverse(f"admin:{app}_{model}_{page}")
            allowed = _admin_allowed(app, model, page)
            for caller in CALLERS:
                response = clients[caller].get(url)
                if caller in allowed and response.status_code != 200:
                    failures.append(f"{caller} {url}: expected 200, got {response.status_code}")
                if caller not in allowed and not _refused(response):
                    failures.append(
                        f"{caller} {url}: expected a refusal, got {response.status_code}"
                    )
                if caller not in allowed and HIDDEN.encode() in _content(response):
                    failures.append(f"{caller} {url}: refused, but shows private things")
    assert len(ADMIN_MODELS) > 10
    assert not failures, "\n".join(failures)


def test_admin_index_is_for_staff_only(world: World):
    for caller in CALLERS:
        response = _client(caller, world).get("/admin/")
        if caller in STAFF:
            assert response.status_code == 200, caller
        else:
            assert _refused(response), (caller, response.status_code)
