"""GET /api/v1/control/status: every zone and actuator, its state and why (staff roles)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from control import runtime
from control.status import actuator_status, output_rows, zone_status
from core.openapi import STAFF_READ


def _actuator(row: dict) -> dict:
    return {
        "id": row["id"],
        "name": row["name"],
        "state": row["state"],
        "confirmed": row["confirmed"],
        "fault": row["fault"],
        "why": row["why"],
        "owner": row["owner"],
        "strategy": row["strategy"],
        "since": row["since"],
        "override": row["override"].pk if row["override"] else None,
    }


def _output(row: dict) -> dict:
    """A weather-compensated circuit's analogue output, as on the staff page."""
    keys = ("id", "name", "output_kind", "unit", "outside_c", "flow_setpoint_c", "flow_c",
            "value", "position_pct", "raw", "owner", "strategy", "why", "fault", "confirmed",
            "decided_at")  # fmt: skip
    return {
        **{k: row[k] for k in keys},
        "override": row["override"].pk if row["override"] else None,
    }


class ControlStatusView(APIView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        tags=["control"],
        summary="Plant status: why each zone heats or not",
        description="Zones and actuators with their state and the reason for it, and each "
        "weather-compensated circuit's analogue output (`outputs`), as of the last tick. "
        + STAFF_READ,
    )
    def get(self, request: Request) -> Response:
        zones = zone_status()
        return Response(
            {
                "last_tick": runtime.load_last_tick(),
                "zones": [
                    {
                        "id": z["id"],
                        "slug": z["slug"],
                        "name": z["name"],
                        "temperature": z["temperature"],
                        "reading_at": z["reading_at"],
                        "target": z["target"],
                        "demand": z["demand"],
                        "mode": z["mode"],
                        "reason": z["reason"],
                        "flags": z["flags"],
                        "actuators": [a["id"] for a in z["actuators"]],
                    }
                    for z in zones
                ],
                "actuators": [_actuator(a) for a in actuator_status()],
                "outputs": [_output(c) for c in output_rows()],
            }
        )
