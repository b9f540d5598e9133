"""A coil is one of its board's relays: coil numbers at or past the board's coil count are
refused, from both sides (the actuator's coil, and a board's count shrunk below a coil in use).

The board is what the host names, not its spelling (sensors.models.same_board_hosts), as for
duplicate coils. An actuator on a board with no RelayBoard row is not checked: only the Modbus
address range applies (sensors/models.py).
"""

from __future__ import annotations

from django.apps import apps

from sensors.models import Actuator, same_board_hosts


def coil_beyond_board(actuator: Actuator) -> dict[str, str]:
    """{"coil": why} when the actuator's coil is not one of its relay board's, else {}."""
    if actuator.driver != Actuator.Driver.MODBUS_COIL or not actuator.host:
        return {}
    if actuator.coil is None:
        return {}
    RelayBoard = apps.get_model("control", "RelayBoard")
    boards = {
        b.pk: b for b in RelayBoard.objects.filter(port=actuator.port, device_id=actuator.device_id)
    }
    same, _ = same_board_hosts(actuator.host, {pk: b.host for pk, b in boards.items()})
    for pk in sorted(same):
        board = boards[pk]
        if actuator.coil >= board.coil_count:
            return {
                "coil": f"Coil {actuator.coil} is beyond relay board '{board.name}', which has "
                f"{board.coil_count} coils (0–{board.coil_count - 1})."
            }
    return {}


def actuators_beyond(board) -> str:
    """Why the board's coil count is too small for the actuators already on it ("" if not)."""
    candidates = dict(
        Actuator.objects.filter(
            driver=Actuator.Driver.MODBUS_COIL,
            port=board.port,
            device_id=board.device_id,
            coil__gte=board.coil_count,
        ).values_list("pk", "host")
    )
    same, _ = same_board_hosts(board.host, candidates)
    if not same:
        return ""
    first = Actuator.objects.filter(pk__in=same).order_by("-coil", "pk").first()
    return (
        f"Actuator '{first.name}' uses coil {first.coil} of this board: the board needs at "
        f"least {first.coil + 1} coils."
    )
