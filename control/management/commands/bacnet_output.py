"""manage.py bacnet_output: map a BACnet binary output to an actuator, command it, release it.

    manage.py bacnet_output boiler-enable --controller boiler-house --object binary-output,1
    manage.py bacnet_output boiler-enable --on --reason "Commissioning: boiler enable test"
    manage.py bacnet_output boiler-enable --release --reason "Commissioning done"

Every command is audited (ActuatorCommand) with its reason before it is sent; the row records
when it went out, whether the controller confirmed it and, if not, what it read back.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from control.drivers import bacnet
from control.models import ActuatorCommand
from sensors.models import Actuator, BacnetDevice


class Command(BaseCommand):
    help = "Map a BACnet binary output to an actuator; switch it at its priority or release it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="Actuator name")
        parser.add_argument("--controller", help="Node name of the BACnet controller (to map)")
        parser.add_argument("--object", help="binary-output,N or binary-value,N (to map)")
        parser.add_argument("--priority", type=int, help="Priority-array slot, 1-16 (8)")
        what = parser.add_mutually_exclusive_group()
        what.add_argument("--on", action="store_true")
        what.add_argument("--off", action="store_true")
        what.add_argument("--release", action="store_true", help="NULL at our priority")
        what.add_argument("--status", action="store_true", help="Read back, write nothing")
        parser.add_argument("--reason", default="", help="Why (audited); required to command")

    def handle(self, *args, **opts) -> None:
        actuator = Actuator.objects.filter(name=opts["name"]).first()
        if opts["controller"] or opts["object"]:
            actuator = self._map(actuator, opts)
        if actuator is None:
            raise CommandError(f"No actuator named '{opts['name']}'.")
        if actuator.driver != Actuator.Driver.BACNET:
            raise CommandError(f"Actuator '{actuator.name}' is not a BACnet output.")
        if opts["status"]:
            self._status(actuator)
        elif opts["on"] or opts["off"] or opts["release"]:
            self._command(actuator, None if opts["release"] else opts["on"], opts)

    def _map(self, actuator: Actuator | None, opts) -> Actuator:
        device = BacnetDevice.objects.filter(node__name=opts["controller"]).first()
        if opts["controller"] and device is None:
            raise CommandError(f"No BACnet controller named '{opts['controller']}'.")
        actuator = actuator or Actuator(name=opts["name"])
        actuator.driver = Actuator.Driver.BACNET
        actuator.bacnet_device = device or actuator.bacnet_device
        actuator.bacnet_object = opts["object"] or actuator.bacnet_object
        if opts["priority"] is not None:
            actuator.bacnet_priority = opts["priority"]
        try:
            actuator.full_clean()
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise CommandError(f"{field}: {' '.join(messages)}") from exc
        actuator.save()
        self.stdout.write(
            f"Actuator '{actuator.name}': {actuator.bacnet_object} of "
            f"{actuator.bacnet_device.node.name} at priority {actuator.bacnet_priority}."
        )
        return actuator

    def _status(self, actuator: Actuator) -> None:
        from sensors.devices import bacnet_client
        from sensors.devices.bacnet_client import BacnetError

        device = actuator.bacnet_device
        try:
            read = bacnet_client.read_command_state(
                device.address,
                actuator.bacnet_object,
                priority=actuator.bacnet_priority,
                local=bacnet.local_address(),
                client_instance=bacnet.client_instance(),
                timeout_s=device.timeout_s,
            )
        except (BacnetError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self._describe(actuator, read))

    def _describe(self, actuator: Actuator, read) -> str:
        held = "the relinquish-default" if read.priority is None else f"priority {read.priority}"
        ours = bacnet.words(read.ours) if read.ours is not None else "NULL"
        return (
            f"{actuator.bacnet_object} is {bacnet.words(read.value)}, held by {held}; "
            f"our priority {actuator.bacnet_priority} holds {ours}."
        )

    def _command(self, actuator: Actuator, state: bool | None, opts) -> None:
        if not opts["reason"].strip():
            raise CommandError("Say why with --reason: every command is audited with its reason.")
        if not actuator.enabled and state is not None:
            raise CommandError(f"Actuator '{actuator.name}' is disabled: it is never switched.")
        reason = opts["reason"].strip()[:500]
        row = ActuatorCommand.objects.create(
            actuator=actuator,
            state=bool(state),
            reason=(
                f"Released (NULL at priority {actuator.bacnet_priority}): {reason}"
                if state is None
                else f"Commanded by hand: {reason}"
            ),
            strategy="bacnet_output",
            requested_at=timezone.now(),
        )
        result, read = bacnet.apply_one(bacnet.target_for(actuator, state))

        def at(value: float | None) -> datetime | None:
            return None if value is None else datetime.fromtimestamp(value, UTC)

        ActuatorCommand.objects.filter(pk=row.pk).update(
            sent_at=at(result.sent_at), confirmed_at=at(result.confirmed_at), error=result.error
        )
        if read is not None:
            self.stdout.write(self._describe(actuator, read))
        if result.error:
            raise CommandError(result.error)
        self.stdout.write(f"{bacnet.words(state)}: confirmed.")
