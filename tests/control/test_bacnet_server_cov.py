"""COV from the site's BACnet device (control/bacnet_server.py): the independent bac-py client
(tests/control/bacnet_peer_client.py) subscribes to a zone's objects as a head-end would and is
notified when the zone's values change; subscriptions are bounded in number and lifetime."""

from __future__ import annotations

import json
import subprocess

import pytest

from control.bacnet_server import MAX_COV_LIFETIME_S, SiteDevice, ZonePoint
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, PEER_PYTHON, free_udp_port

from .test_bacnet_server import CLIENT


def hall(**values) -> list[ZonePoint]:
    base = {"zone_id": 7, "name": "Hall", "temperature": 18.5, "setpoint": 20.0,
            "occupied": False, "demand": False}  # fmt: skip
    return [ZonePoint(**(base | values))]


@pytest.fixture
def device():
    port = free_udp_port(OUR_HOST)
    site = SiteDevice(f"{OUR_HOST}/32:{port}", 4194001, "Test site", max_subscriptions=2)
    site.start()
    site.address = f"{OUR_HOST}:{port}"
    site.update(hall())
    yield site
    site.stop()


class Subscriber:
    """The bac-py client as a running process: subscribes, then prints what it is told."""

    def __init__(self, server: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(PEER_PYTHON), CLIENT, server, "--interface", PEER_HOST, *args],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def next(self) -> dict:
        line = self.process.stdout.readline()
        assert line, "the subscriber ended"
        return json.loads(line)

    def take(self, count: int) -> list[dict]:
        return [self.next() for _ in range(count)]

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


def test_a_head_end_subscribed_to_a_zone_is_told_of_its_changes(device):
    sub = Subscriber(
        device.address, "--subscribe", "analog-input,7", "--subscribe", "binary-value,7",
        "--notifications", "4",
    )  # fmt: skip
    try:
        assert sub.take(2) == [
            {"subscribe": "analog-input,7", "ok": True},
            {"subscribe": "binary-value,7", "ok": True},
        ]
        # Each subscription is first told the values now (clause 13.1.2).
        now = {n["notification"]: n["value"] for n in sub.take(2)}
        assert now == {"analog-input,7": pytest.approx(18.5), "binary-value,7": 0}
        device.update(hall(temperature=19.25, occupied=True))
        changed = {n["notification"]: n["value"] for n in sub.take(2)}
        assert changed == {"analog-input,7": pytest.approx(19.25), "binary-value,7": 1}
    finally:
        sub.close()


def test_subscriptions_are_bounded_in_number(device):
    sub = Subscriber(
        device.address, "--subscribe", "analog-input,7", "--subscribe", "binary-value,7",
        "--subscribe", "analog-value,7",
    )  # fmt: skip
    try:
        assert sub.take(3) == [
            {"subscribe": "analog-input,7", "ok": True},
            {"subscribe": "binary-value,7", "ok": True},  # the second: the bound
            {"subscribe": "analog-value,7", "error": "resources: no_space_to_add_list_element"},
        ]
    finally:
        sub.close()


def test_a_subscriptions_lifetime_is_bounded_none_indefinite(device):
    refused = {"subscribe": "analog-value,7", "error": "services: value_out_of_range"}
    for lifetime, answer in [
        (MAX_COV_LIFETIME_S, {"subscribe": "analog-value,7", "ok": True}),
        (MAX_COV_LIFETIME_S + 1, refused),
        (0, refused),  # "indefinite": a head-end that forgets us would hold it for ever
    ]:
        sub = Subscriber(
            device.address, "--subscribe", "analog-value,7", "--lifetime", str(lifetime)
        )
        try:
            assert sub.take(1) == [answer]
        finally:
            sub.close()
