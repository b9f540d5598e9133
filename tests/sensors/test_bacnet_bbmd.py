"""Discovery across a routed network: the bac-py controller (tests/sensors/bacnet_controller.py)
is also its network's BBMD, and its broadcasts reach no one but the foreign devices registered
with it. Our client registers as a foreign device (a bounded time-to-live), its Who-Is is
distributed there and the controller's I-Am forwarded back to it."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import BacnetError
from tests.sensors.bacnet_peer import INSTANCE, OUR_HOST, PEER_HOST, Controller, free_udp_port

LOCAL = f"{OUR_HOST}/32:0"


@pytest.fixture
def routed(settings):
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_PORT = free_udp_port(OUR_HOST)
    peer = Controller(free_udp_port(PEER_HOST), "", bbmd=True)
    peer.start()
    yield peer
    peer.stop()


def test_a_controller_behind_a_bbmd_is_found_as_a_foreign_device(routed):
    assert bacnet_client.discover(None, local=LOCAL, client_instance=4194000, wait_s=1) == []
    found = bacnet_client.discover(
        None, local=LOCAL, client_instance=4194000, wait_s=2, bbmd=routed.address, ttl_s=10
    )
    assert [(f.instance, f.address) for f in found] == [(INSTANCE, routed.address)]


def test_the_discover_command_takes_the_bbmd_from_the_settings(routed, settings, capsys):
    settings.BMS_BACNET_BBMD = routed.address
    call_command("bacnet", "discover", "--wait", "2")
    assert f"device {INSTANCE} at {routed.address}" in capsys.readouterr().out


def test_a_bbmd_that_does_not_answer_is_an_error_in_words():
    silent = f"{PEER_HOST}:{free_udp_port(PEER_HOST)}"
    with pytest.raises(BacnetError, match=f"BBMD {silent} did not register us"):
        bacnet_client.discover(None, local=LOCAL, client_instance=4194000, wait_s=0.5,
                               bbmd=silent)  # fmt: skip


@pytest.mark.parametrize(("ttl", "ok"), [(9, False), (10, True), (3600, True), (3601, False)])
def test_the_time_to_live_is_bounded(ttl, ok):
    if ok:
        assert bacnet_client.check_ttl(ttl) == ttl
    else:
        with pytest.raises(ValueError, match="out of range 10-3600"):
            bacnet_client.check_ttl(ttl)
