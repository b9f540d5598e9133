"""Pump kick: a pump idle for a week runs briefly (default 30 s after 7 days) so it does not
seize over summer."""

from __future__ import annotations

from control.engine.specs import KickSpec


def due(
    kick: KickSpec | None,
    is_on: bool | None,
    idle_since: float | None,
    kick_started: float | None,
    now_s: float,
) -> bool:
    """Whether the pump should be running as a kick now."""
    if kick is None:
        return False
    if kick_started is not None:
        return now_s - kick_started < kick.run_s
    return is_on is False and idle_since is not None and now_s - idle_since >= kick.idle_s
