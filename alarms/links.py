"""What an alarm is about, in links and words: the object's page, the alarm's section of
docs/ALARMS.md (served at /staff/help/alarms, staff/help.py) and what to do first.

Derived from the alarm's key (`<kind>:<object id>[:...]`), so no alarm row stores a URL that a
renamed route would leave dead. The objects' models sit above this app; they are named here
as admin route names (strings), never imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

HELP_URL = "/staff/help/alarms"


@dataclass(frozen=True)
class Kind:
    # The admin model ("app_model") whose change page is the object, or None (system alarms).
    thing: str | None
    # What the link to the object says.
    thing_label: str
    # The first thing a person should do, in plain words.
    action: str


KINDS: dict[str, Kind] = {
    "node-silent": Kind(
        "sensors_node", "the node", "Check the node's power, battery and radio or network link."
    ),
    "gateway-nodes-silent": Kind(
        "sensors_gatewaykey",
        "the gateway key",
        "Check the gateway; delete nodes that are not real.",
    ),
    "inputs-capped": Kind(
        "sensors_site",
        "the site",
        "Configure or delete the extra inputs, or stop the devices sending those keys.",
    ),
    "node-input-errors": Kind(
        "sensors_node", "the node", "Look at the node's input errors; fix what it sends."
    ),
    "gateway-input-errors": Kind(
        "sensors_gatewaykey", "the gateway key", "Fix what the gateway sends for those inputs."
    ),
    "sensor-range": Kind(
        "sensors_sensor",
        "the sensor",
        "Check the probe and its wiring where it is; if the range is wrong, change it.",
    ),
    "modbus-meter": Kind(
        "sensors_node", "the meter", "Check the meter's power, cable and address."
    ),
    "modbus-register": Kind(
        "sensors_node", "the meter", "Check the register's address and type in the meter's map."
    ),
    "bacnet-device": Kind(
        "sensors_node",
        "the controller",
        "Check the controller's power and network, and its address and device number.",
    ),
    "bacnet-point": Kind(
        "sensors_node",
        "the controller",
        "Check the point still exists on the controller; remove it from its points if not.",
    ),
    "bacnet-fault": Kind(
        "sensors_node",
        "the controller",
        "Check the sensor and its wiring at the controller: the controller says it is faulty.",
    ),
    "bacnet-out-of-service": Kind(
        "sensors_node",
        "the controller",
        "Ask who took the point out of service at the controller, and put it back in service.",
    ),
    "bacnet-priority": Kind(
        "sensors_actuator",
        "the actuator",
        "Find the hand switch or override at the controller holding the point, and release it.",
    ),
    "ical": Kind("control_zone", "the zone", "Check the calendar's address and that it is up."),
    "ical-capped": Kind(
        "control_zone", "the zone", "Trim the calendar, or give the room a calendar of its own."
    ),
    "relay": Kind(
        "sensors_actuator",
        "the actuator",
        "Check the relay board's power and network, and that the device switched.",
    ),
    "zone-valves": Kind("control_zone", "the zone", "Check the zone's valves and their board."),
    "plant-circuit": Kind(
        "control_heatingplant", "the heating plant", "Check why every valve of the plant is shut."
    ),
    "zone-sensor": Kind(
        "control_zone", "the zone", "Check the room's temperature sensor and its node."
    ),
    "plant-outside": Kind(
        "control_heatingplant", "the heating plant", "Check the outside sensor and its node."
    ),
    "plant-flow": Kind(
        "control_heatingplant", "the heating plant", "Check the flow sensor and its node."
    ),
    "plant-output": Kind(
        "control_heatingplant", "the heating plant", "Check the output board and the valve."
    ),
    "relay-watchdog": Kind(
        "control_relayboard", "the relay board", "Check the relay board's settings and network."
    ),
    "solar-sensor": Kind(
        "control_solarcircuit", "the solar circuit", "Check the collector and tank sensors."
    ),
    "control-db": Kind(None, "", "Check the database server; control runs on its last settings."),
    "celery-worker": Kind(None, "", "Start the worker (docs/DEPLOYMENT.md); check its log."),
    "celery-beat": Kind(None, "", "Start beat; check its log. Nothing is scheduled meanwhile."),
    "ingest-backlog": Kind(None, "", "Check the ingest workers are running and keeping up."),
    "feeds-backlog": Kind(None, "", "Check the commit worker and the data disk."),
    "feed-refused": Kind(
        "feeds_feed", "the feed", "Check the sender's clock; then acknowledge the alarm."
    ),
    "data-disk": Kind(None, "", "Free space on the data disk, or give it more."),
}


def kind_of(key: str) -> str:
    return key.split(":", 1)[0]


def help_url(key: str) -> str:
    """The alarm's row in ALARMS.md as served with the site; the list's top for other kinds."""
    kind = kind_of(key)
    return f"{HELP_URL}#{kind}" if kind in KINDS else HELP_URL


def thing_url(key: str) -> str | None:
    """The admin page of the object the alarm is about, or None (a system alarm, no id)."""
    kind = KINDS.get(kind_of(key))
    head = key.split(":", 2)[1] if key.count(":") else ""
    if kind is None or kind.thing is None or not (head.isascii() and head.isdigit()):
        return None
    try:
        return reverse(f"admin:{kind.thing}_change", args=[int(head)])
    except NoReverseMatch:
        # A model the admin does not show (not registered): no link rather than an error page.
        return None


def thing_label(key: str) -> str:
    kind = KINDS.get(kind_of(key))
    return kind.thing_label if kind is not None else ""


def action(key: str) -> str:
    kind = KINDS.get(kind_of(key))
    return kind.action if kind is not None else "See the help for this alarm."
