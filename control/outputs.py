"""The tick's analogue side: weather-compensated plants' outputs (a holding register or a
three-point valve's pulses) and relay boards' watchdog registers. Called by control/runner.py
after the relays are served; audited like relay commands (AnalogueCommand rows for registers,
ActuatorCommand rows for pulses), alarmed like them.

Runtime state (last value written, when, fault) is in Redis beside the actuators' state, so a
worker restart neither loses it nor rewrites an audit row for an unchanged output.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from control import bacnet_outputs, config_cache
from control.drivers import registers, three_point
from control.engine.specs import OutputDecision
from control.models import ActuatorCommand, AnalogueCommand, RelayBoard
from control.runtime import PREFIX
from core.redis import get_redis

log = logging.getLogger(__name__)

OUTPUTS_KEY = f"{PREFIX}:outputs"  # hash: plant id -> JSON of its output's runtime state
WATCHDOGS_KEY = f"{PREFIX}:watchdogs"  # hash: relay board id -> JSON of its watchdog status

Alarm = Callable[[str, str], None]
Clear = Callable[[str], None]


def output_alarm_key(plant_id: int) -> str:
    return f"plant-output:{plant_id}"


def watchdog_alarm_key(board_id: int) -> str:
    return f"relay-watchdog:{board_id}"


def _at(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def load(key: str, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    raw = get_redis().hmget(key, [str(i) for i in ids])
    return {i: json.loads(r) if r else {} for i, r in zip(ids, raw, strict=True)}


def _save(key: str, states: dict[int, dict[str, Any]]) -> None:
    if states:
        get_redis().hset(key, mapping={str(i): json.dumps(s) for i, s in states.items()})


# --- holding register outputs and three-point pulses ------------------------------------------


def finish_pulses(alarm: Alarm, clear: Clear, may_alarm: bool, offline: str = "") -> int:
    """Collect the pulses started by the last tick (they have ended: a pulse is shorter than a
    tick) before any relay is touched again; complete their audit rows; alarm a failed one.
    A pulse started while the database was away has its row written now, or queued in Redis
    (config_cache.queue_audit) if the database is still away."""
    faults = 0
    pulse_faults: dict[int, str] = {}
    for res in three_point.collect(wait_s=settings.BMS_CONTROL_TICK):
        t = res.target
        if t.command_id is not None:
            try:
                ActuatorCommand.objects.filter(pk=t.command_id).update(
                    sent_at=_at(res.sent_at), confirmed_at=_at(res.done_at), error=res.error
                )
            except DatabaseError:
                log.exception("control: cannot complete the audit row of a valve pulse")
        elif t.audit is not None:
            row = ActuatorCommand(
                **t.audit,
                sent_at=_at(res.sent_at),
                confirmed_at=_at(res.done_at),
                error=res.error,
            )
            _write_or_queue_pulse(row, offline)
        # The valve's fault as the staff page shows it: the last pulse's, until the next one.
        pulse_faults[t.plant_id] = res.error
        key = output_alarm_key(t.plant_id)
        if res.error:
            faults += 1
            log.warning("three-point pulse of plant %s failed: %s", t.plant_id, res.error)
            if may_alarm:
                alarm(
                    key,
                    f"Three-point valve of heating plant '{t.plant_name or t.plant_id}': "
                    f"{res.error}",
                )
        else:
            clear(key)
    if pulse_faults:
        states = load(OUTPUTS_KEY, list(pulse_faults))
        _save(OUTPUTS_KEY, {pid: {**states[pid], "fault": e} for pid, e in pulse_faults.items()})
    return faults


def _write_or_queue_pulse(row: ActuatorCommand, offline: str) -> None:
    if not offline:
        try:
            row.save()
            return
        except DatabaseError:
            log.exception("control: cannot write the audit row of a valve pulse: queued")
    config_cache.queue_audit([row])


def _queue_outputs(rows: list[AnalogueCommand]) -> None:
    """Output audit rows the database could not take: written by the first tick that can
    (control/runner.py _catch_up), as the relays' rows are."""
    for row in rows:
        log.warning(
            "output audit (database unavailable, queued) plant %s: %s", row.plant_id, row.reason
        )
    config_cache.queue_analogue(rows)


def apply(
    outputs: dict[int, OutputDecision],
    actuators: dict,
    now: datetime,
    offline: str,
    alarm: Alarm,
    clear: Clear,
    may_alarm: bool,
    plant_weather: dict[int, Any],
    plant_names: dict[int, str],
) -> dict[str, int]:
    """Write each register output (every tick: a module that rebooted gets its value back),
    start each pulse. Audit rows: a changed value, a keep-alive, the first retry of a fault;
    while the database is away they wait in Redis (config_cache.queue_analogue)."""
    now_s = now.timestamp()
    states = load(OUTPUTS_KEY, list(outputs))
    targets, rows, pulses = [], {}, []
    bacnet_outs: dict[int, tuple[Any, OutputDecision]] = {}
    updated: dict[int, dict[str, Any]] = {}
    for pid, out in outputs.items():
        w = plant_weather[pid]
        reason = f"[{offline}] {out.reason}" if offline else out.reason
        # What the staff page shows, whatever the output kind (control/status.py).
        updated[pid] = {
            **states.get(pid, {}),
            "value": out.value,
            "unit": out.unit,
            "reason": reason,
            "strategy": out.strategy,
            "owner": out.owner,
            "flow_setpoint_c": out.flow_setpoint_c,
            "outside_c": out.outside_c,
            "flow_c": out.flow_c,
            "position_pct": out.position_pct,
            "decided_at": now_s,
        }
        is_bacnet = w.output == "bacnet"
        if out.raw is not None or is_bacnet:
            state = states.get(pid, {})
            # A BACnet output carries the value itself: a change of 0.1 (% or °C) is a change.
            changed = (
                state.get("sent_value") != round(out.value, 1)
                if is_bacnet
                else state.get("raw") != out.raw
            )
            # A row every BMS_CONTROL_KEEPALIVE while the value holds, timed from the last row
            # (the register is written every tick, so timing it from the last write never
            # came due: the outside test saw no keep-alive row in 12 minutes). Not while it
            # faults: that is one row per fault episode (an output never written was a
            # "Keep-alive" row every tick).
            audited_s = state.get("audited_at")
            keepalive = (
                audited_s is not None
                and not state.get("fault")
                and now_s - audited_s >= settings.BMS_CONTROL_KEEPALIVE
            )
            first_retry = bool(state.get("fault")) and not state.get("fault_audited")
            # Who holds it changed (an override set or ended at the same value): audited too.
            handed_over = state.get("strategy") not in (None, out.strategy)
            if changed or keepalive or first_retry or handed_over:
                prefix = (
                    ""
                    if changed or handed_over
                    else ("Retry after a fault: " if first_retry else "Keep-alive: ")
                )
                rows[pid] = AnalogueCommand(
                    plant_id=pid,
                    value=round(out.value, 2),
                    unit=out.unit,
                    raw=out.raw,
                    reason=prefix + reason,
                    strategy=out.strategy,
                    user_id=out.user_id,
                    requested_at=now,
                )
            if is_bacnet:
                bacnet_outs[pid] = (w, out)
            else:
                targets.append(
                    registers.RegisterTarget(
                        f"{pid}", w.host, w.port, w.device_id, w.register, out.raw
                    )
                )
        elif out.pulse_actuator_id is not None and out.pulse_s > 0:
            pulses.append((pid, out, reason))
    queued = bool(offline)
    if rows and not offline:
        try:
            AnalogueCommand.objects.bulk_create(rows.values())
        except DatabaseError:
            log.exception("control: cannot write output audit rows: queued in Redis")
            for row in rows.values():
                row.pk = None
            queued = True
    results: dict[str, Any] = registers.write(
        targets,
        timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
        deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
        attempts=settings.BMS_CONTROL_DEVICE_ATTEMPTS,
    )
    results.update({str(pid): r for pid, r in bacnet_outputs.write(bacnet_outs).items()})
    bacnet_outputs.release_unheld({pid: w for pid, (w, _) in bacnet_outs.items()}, now, offline)
    faults = 0
    recovered: list[AnalogueCommand] = []
    for pid, res in ((int(k), r) for k, r in results.items()):
        out = outputs[pid]
        before = states.get(pid, {})
        row = rows.get(pid)
        if row is not None:
            sent, confirmed = _at(res.sent_at), _at(res.sent_at if res.confirmed else None)
            if queued:
                row.sent_at, row.confirmed_at, row.error = sent, confirmed, res.error
            else:
                try:
                    AnalogueCommand.objects.filter(pk=row.pk).update(
                        sent_at=sent, confirmed_at=confirmed, error=res.error
                    )
                except DatabaseError:
                    log.exception("control: cannot complete an output audit row")
        if pid in bacnet_outs:
            updated[pid]["sent_value"] = round(out.value, 1)
        updated[pid].update(
            raw=out.raw,
            sent_at=res.sent_at if res.written else before.get("sent_at"),
            confirmed=res.confirmed,
            fault=res.error,
            fault_audited=bool(res.error)
            and (bool(before.get("fault_audited")) or row is not None),
            alarmed=bool(res.error) and bool(before.get("alarmed")),
            audited_at=now_s if row is not None else before.get("audited_at"),
        )
        key = output_alarm_key(pid)
        if res.error:
            faults += 1
            if may_alarm and not before.get("alarmed"):
                w = plant_weather[pid]
                to = (
                    f"to {bacnet_outputs.where(w)}"
                    if pid in bacnet_outs
                    else f"(raw {out.raw}) to {w.host}:{w.port} holding register {w.register}"
                )
                alarm(
                    key,
                    f"Heating plant '{plant_names.get(pid, pid)}': output {out.value:.1f} "
                    f"{out.unit} {to} not confirmed: {res.error}",
                )
                updated[pid]["alarmed"] = True
        elif before.get("alarmed"):
            clear(key)
        if not res.error and before.get("fault") and row is None:
            # The fault's retry row was the newest of this output, so its log read as still
            # failing after the output had been confirmed for minutes (outside test, session
            # 6): the first good write after a fault is a row of its own.
            recovered.append(
                AnalogueCommand(
                    plant_id=pid, value=round(out.value, 2), unit=out.unit, raw=out.raw,
                    reason=f"Recovered after a fault: {updated[pid]['reason']}",
                    strategy=out.strategy, user_id=out.user_id, requested_at=now,
                    sent_at=_at(res.sent_at),
                    confirmed_at=_at(res.sent_at if res.confirmed else None),
                )
            )  # fmt: skip
            updated[pid]["audited_at"] = now_s
    if queued and rows:
        _queue_outputs(list(rows.values()))
    if recovered and not queued:
        try:
            AnalogueCommand.objects.bulk_create(recovered)
            recovered = []
        except DatabaseError:
            log.exception("control: cannot write output audit rows: queued in Redis")
    if recovered:
        _queue_outputs(recovered)
    started = 0
    # Pulses still running (the last tick's collection gave up waiting), in any process.
    in_flight = three_point.in_flight() if pulses else set()
    for pid, out, reason in pulses:
        w = plant_weather[pid]
        act = actuators.get(out.pulse_actuator_id)
        other = actuators.get(w.close_id if out.pulse_actuator_id == w.open_id else w.open_id)
        if act is None or other is None or pid in in_flight:
            continue
        audit = {
            "actuator_id": act.pk,
            "state": True,
            "reason": f"Pulse {out.pulse_s:.1f} s: {reason}",
            "strategy": out.strategy,
            "user_id": out.user_id,
            "requested_at": now,
        }
        row = None
        if not offline:
            try:
                row = ActuatorCommand.objects.create(**audit)
            except DatabaseError:
                log.exception("control: cannot write the audit row of a valve pulse: queued")
        three_point.start(
            three_point.PulseTarget(
                pid,
                act.pk,
                row.pk if row is not None else None,
                act.host,
                act.port,
                act.device_id,
                act.coil,
                other.coil,
                out.pulse_s,
                # Without a row in the database the pulse's row is written (or queued) when
                # the pulse is collected, with what the relays answered.
                audit=None if row is not None else audit,
                plant_name=plant_names.get(pid, str(pid)),
            ),
            timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
        )
        started += 1
        updated[pid]["pulse"] = {"actuator_id": act.pk, "seconds": out.pulse_s, "at": now_s}
    _save(OUTPUTS_KEY, updated)
    return {"output_faults": faults, "pulses": started}


# --- relay board watchdogs --------------------------------------------------------------------


def watchdogs(
    now_s: float,
    relay_results: dict,
    actuators: dict,
    alarm: Alarm,
    clear: Clear,
    may_alarm: bool,
    before: dict | None = None,
) -> int:
    """Each board's watchdog register is read every tick (a rebooted board resets it to its
    default without saying so, and it read 0 for minutes while the status said "written 4 min
    ago") and rewritten when it reads another value, and whatever it reads: at start, after a
    failed read or write (the board was away: a reconnect), when the board comes back (a relay
    on it was corrected, i.e. it rebooted, or went from fault to answering), when its
    configuration changes, and every `rewrite_s`. `before` is the relays' runtime state of the
    last tick. Returns the number of boards whose watchdog is not confirmed."""
    boards = list(RelayBoard.objects.filter(enabled=True, watchdog_register__isnull=False))
    if not boards:
        return 0
    states = load(WATCHDOGS_KEY, [b.pk for b in boards])
    back: set[tuple[str, int]] = set()
    for aid, res in relay_results.items():
        act = actuators.get(aid)
        if act is None:
            continue
        was_faulty = before is not None and aid in before and bool(before[aid].fault)
        answered = not res.error
        if getattr(res, "corrected", False) or (was_faulty and answered):
            back.add((act.host, act.port))
    forced: dict[str, str] = {}
    for b in boards:
        s = states.get(b.pk, {})
        why = ""
        if not s:
            why = "first write"
        elif s.get("value") != b.watchdog_value or s.get("register") != b.watchdog_register:
            why = "configuration changed"
        elif not s.get("ok"):
            why = "after a failed read or write (reconnected)"
        elif (b.host, b.port) in back:
            why = "the board came back (a relay on it had to be re-asserted or had not answered)"
        elif now_s - (s.get("written_at") or 0) >= b.rewrite_s:
            why = f"every {b.rewrite_s} s"
        if why:
            forced[str(b.pk)] = why
    results = registers.ensure(
        [
            registers.RegisterTarget(
                str(b.pk), b.host, b.port, b.device_id, b.watchdog_register, b.watchdog_value
            )
            for b in boards
        ],
        set(forced),
        timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
        deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
        attempts=settings.BMS_CONTROL_DEVICE_ATTEMPTS,
    )
    failed = 0
    updated = {}
    for b in boards:
        res = results[str(b.pk)]
        was = states.get(b.pk, {})
        ok = res.confirmed
        rewrite = ""
        if res.written:
            rewrite = forced.get(str(b.pk)) or (
                f"read {res.found}, not {b.watchdog_value} (the board reset it)"
            )
            log.warning("relay board '%s': watchdog register rewritten: %s", b.name, rewrite)
        updated[b.pk] = {
            "ok": ok,
            "written_at": now_s if (ok and res.written) else was.get("written_at"),
            "rewrite_reason": rewrite or was.get("rewrite_reason", ""),
            "tried_at": now_s,
            # What the register held when last read, and when (None: not readable).
            "read_value": res.read_back,
            "read_at": now_s if res.read_back is not None else was.get("read_at"),
            "found": res.found,
            "unreadable": res.unreadable,
            "error": res.error,
            "value": b.watchdog_value,
            "register": b.watchdog_register,
            "alarmed": not ok and bool(was.get("alarmed")),
        }
        key = watchdog_alarm_key(b.pk)
        if not ok:
            failed += 1
            if may_alarm and not was.get("alarmed"):
                updated[b.pk]["alarmed"] = True
                what = "refused" if res.refused else "not confirmed"
                alarm(
                    key,
                    f"Relay board '{b.name}' ({b.host}:{b.port}): watchdog register "
                    f"{b.watchdog_register} {what}: {res.error}. Its outputs may not drop to "
                    "their safe state if the server stops.",
                )
        elif was.get("alarmed"):
            clear(key)
    _save(WATCHDOGS_KEY, updated)
    return failed


def watchdog_status(board_ids: list[int]) -> dict[int, dict[str, Any]]:
    return load(WATCHDOGS_KEY, board_ids)


def output_status(plant_ids: list[int]) -> dict[int, dict[str, Any]]:
    return load(OUTPUTS_KEY, plant_ids)
