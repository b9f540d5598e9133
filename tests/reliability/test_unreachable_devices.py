"""Relay board and Modbus meter that accept a connection and never answer (hung firmware,
a half-open link): the tick and the poll give up on their timeouts, alarms are raised once
and cleared when the device answers again."""

from __future__ import annotations

import pytest

from alarms.models import Alarm
from control.drivers.simulated_board import RelayBoard
from control.runner import run_tick
from sensors.models import ModbusRegister, Node
from sensors.tasks import poll_modbus_meter
from tests.control import factories as f
from tests.reliability.blackhole import Blackhole
from tests.wait import returns_within

pytestmark = pytest.mark.django_db


def test_a_relay_board_that_never_answers_times_out_and_alarms_once(redis_client, settings):
    settings.BMS_CONTROL_DEVICE_TIMEOUT = 0.5
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.5
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    from django.core import mail

    from alarms.tasks import send_alarm_digest

    with Blackhole() as hung, RelayBoard(coils=8) as board:
        valve = f.relay("Hall valve", board, coil=1)
        f.zone("Hall", valve, temp=4.0)  # frost protection wants it ON
        valve.port = hung.port
        valve.save()
        for _ in range(3):
            report = run_tick()  # it returns: the deadline (1.5 s per board) ends the wait
            assert report["faults"] == 1
        assert hung.accepted, "the driver never even connected"
        alarms = Alarm.objects.filter(key=f"relay:{valve.pk}")
        assert alarms.count() == 1 and alarms.get().is_open  # raised once over three ticks
        assert "did not confirm ON" in alarms.get().message
        # The relay's alarm, and its zone's (it calls for heat with every valve in fault): both
        # in beat's one digest, none sent by the tick itself.
        assert mail.outbox == []
        assert send_alarm_digest() == 2 and len(mail.outbox) == 1
        assert Alarm.objects.filter(key__startswith="zone-valves:").count() == 1
        # The board answers again: confirmed, alarm cleared.
        valve.port = board.port
        valve.save()
        run_tick()
        assert board.coil(1) is True
        assert not Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()
        run_tick()  # the zone's valve has confirmed: the zone can take heat again
        assert not Alarm.objects.filter(cleared_at__isnull=True).exists()


def test_a_meter_that_never_answers_times_out_and_alarms_once(redis_client, settings):
    settings.BMS_MODBUS_TIMEOUT_S = 0.5
    with Blackhole() as hung:
        node = Node(
            name="hung-meter", protocol="modbus", interval=10, modbus_host="127.0.0.1",
            modbus_port=hung.port, modbus_device_id=1,
        )  # fmt: skip
        node.set_new_key()
        node.save()
        ModbusRegister.objects.create(node=node, key="power", address=0, data_type="float32")
        for _ in range(4):
            result = poll_modbus_meter(node.pk)  # it returns: the Modbus timeout ends the wait
            assert "error" in result
        alarms = Alarm.objects.filter(key=f"modbus-meter:{node.pk}")
        assert alarms.count() == 1 and alarms.get().is_open


def test_a_database_server_that_never_answers_is_given_up_on_after_the_connect_timeout():
    """A PostgreSQL host that accepts TCP and never answers (a hung server, a half-open link):
    with the production settings' libpq parameters a process gives up after connect_timeout
    (5 s) with the OperationalError the ingest views answer 503 for, not after minutes."""
    from django.db import OperationalError
    from django.db.utils import ConnectionHandler

    from bms.settings import _database_config

    with Blackhole() as hung:
        config = _database_config(f"postgres://bms@127.0.0.1:{hung.port}/bms")
        assert config["OPTIONS"]["connect_timeout"] == 5

        def connect() -> None:  # in the guard's thread: a connection belongs to its thread
            ConnectionHandler({"default": config})["default"].ensure_connection()

        with pytest.raises(OperationalError, match="timeout"):
            returns_within(connect, 60, "a connect to a database server that never answers")
        assert hung.accepted, "the client never even connected"


def test_a_broker_that_never_answers_is_given_up_on_after_the_socket_timeout():
    """A Redis broker that accepts and never answers: a publish (beat queueing a task, a worker
    acknowledging one) gives up after the transport's 5 s socket timeout. kombu's default is
    to wait forever; this test hung before settings.CELERY_BROKER_TRANSPORT_OPTIONS set it."""
    from kombu.exceptions import OperationalError

    from bms.celery import app
    from sensors.tasks import check_silent_nodes

    with Blackhole() as hung:

        def publish() -> None:
            with app.connection_for_write(f"redis://127.0.0.1:{hung.port}/0") as broker:
                check_silent_nodes.apply_async(connection=broker)

        with pytest.raises(OperationalError, match="Timeout"):
            returns_within(publish, 60, "a publish to a broker that never answers")
        assert hung.accepted, "the client never even connected"
