"""One control tick: snapshot -> evaluate -> send what changed -> confirm -> audit.

Only changes are written, plus a keep-alive re-write every BMS_CONTROL_KEEPALIVE seconds; every
Modbus coil and BACnet output the system drives is read back every tick, so a relay that
rebooted is put back and a board or controller that stopped answering raises its alarm within a
tick. Every write is an ActuatorCommand row (requested before sending, then sent / confirmed /
error). A BACnet output nothing drives is handed back to its controller (NULL at our priority)
rather than held at an idle state, and is not read again until something drives it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from alarms.lifecycle import clear_alarm, in_startup_grace, raise_alarm
from alarms.models import Alarm
from control import config_cache, outputs, runtime
from control import snapshot as snapshot_builder
from control.drivers import bacnet, modbus, node_queue
from control.engine.evaluator import evaluate
from control.engine.specs import Decision
from control.models import ActuatorCommand, AnalogueCommand, HeatingPlant
from sensors.models import Actuator

log = logging.getLogger(__name__)

CHANGE, RETRY, KEEPALIVE, VERIFY = "change", "retry", "keepalive", "verify"
_PREFIX = {CHANGE: "", RETRY: "Retry after a fault: ", KEEPALIVE: "Keep-alive: "}


def alarm_key(actuator_id: int) -> str:
    return f"relay:{actuator_id}"


def db_alarm_key(kind: str) -> str:
    """ "unavailable": the tick ran on cached configuration; "no-cache": it switched nothing."""
    return f"control-db:{kind}"


def run_tick(now: datetime | None = None) -> dict[str, Any]:
    # A lease, not a TTL as long as a tick may take: the lock of a tick whose host died (which
    # the other control host cannot tell from /proc) is free again within the lease, so with a
    # lease no longer than the tick the other host ticks within two tick periods.
    with runtime.tick_lock(settings.BMS_CONTROL_LOCK_LEASE_S) as token:
        if token is None:
            return {"skipped": "another control tick is still running"}
        return _tick(now or timezone.now())


def _tick(now: datetime) -> dict[str, Any]:
    started = time.perf_counter()
    offline = ""  # why the database is not used this tick ("" when it is)
    try:
        live = snapshot_builder.build(now)
    except DatabaseError as exc:
        # The database is unavailable: carry on from the configuration cached by the last
        # tick that could read it, rather than leave every relay where it was on a guess.
        # A broken connection must not linger into the next tick (Celery's Django fixup does
        # the same between tasks).
        connection.close_if_unusable_or_obsolete()
        config = config_cache.load()
        outage = config_cache.note_outage(now, config["cached_at"] if config else None)
        if config is None:
            log.critical(
                "control tick: database unavailable (%s) and no cached configuration: "
                "switching nothing",
                exc,
            )
            report = {"at": now.isoformat(), "skipped": "database unavailable, no cached config"}
            runtime.save_last_tick(report)
            _alarm_offline(
                db_alarm_key("no-cache"),
                f"Control could not read the database since {_hhmm(outage['since'])} and has "
                "no cached configuration: no relay is being switched",
            )
            return report
        live = config_cache.rebuild(config, now)
        offline = (
            f"database unavailable: using configuration cached at {_hhmm(config['cached_at'])}"
        )
        log.error("control tick: %s (%s)", offline, exc)
        _alarm_offline(
            db_alarm_key("unavailable"),
            f"Control cannot read the database since {_hhmm(outage['since'])}: it runs on the "
            f"configuration cached at {_hhmm(config['cached_at'])}",
        )
    else:
        config_cache.save(config_cache.config_of(live.snapshot, live.actuators, live.feeds))
        try:
            _catch_up(now)
        except DatabaseError:
            # Flaky still: what waits stays in Redis for the next tick; switching goes on.
            log.exception("control: cannot yet write what waited for the database")
    built = time.perf_counter()
    evaluation = evaluate(live.snapshot)
    evaluated = time.perf_counter()
    runtime.save_memory(evaluation.memory)
    now_s = now.timestamp()
    alarms = _relay_alarms_due(now_s)
    _sync_alarms(evaluation.alarms, may_alarm_relays=alarms[0])
    handed_back = set()
    for aid, decision in evaluation.decisions.items():
        if bacnet.hands_back(live.actuators[aid], decision):
            handed_back.add(aid)
            reason = bacnet.release_reason(live.actuators[aid], decision)
            evaluation.decisions[aid] = replace(decision, reason=reason)
    if offline:
        # Every reason says so: the staff pages and audit rows show why nothing new was seen.
        for aid, decision in evaluation.decisions.items():
            evaluation.decisions[aid] = replace(decision, reason=f"[{offline}] {decision.reason}")

    plan: dict[int, tuple[Decision, str]] = {}
    for aid, decision in evaluation.decisions.items():
        plan[aid] = (
            decision,
            _kind(
                live.runtime[aid],
                decision,
                now_s,
                settings.BMS_CONTROL_KEEPALIVE,
                released=aid in handed_back,
            ),
        )

    if offline:
        # HTTP nodes fetch their commands from a table: leave them untouched (their runtime
        # state too), so the first tick with the database queues what they should do.
        plan = {
            aid: item
            for aid, item in plan.items()
            if live.actuators[aid].driver != Actuator.Driver.NODE_QUEUE
        }
    commands = _build_commands(plan, live.actuators, now, live.runtime)
    if not offline:
        offline = _save_commands(commands)
    # Three-point valve pulses of the last tick end before any relay is touched again.
    faults = outputs.finish_pulses(_raise_control, _clear, alarms[0], offline)
    results = _send(plan, live.actuators, commands, now, handed_back)
    corrected = _audit_results(plan, live.actuators, commands, results, now, offline, handed_back)
    faults += _update_runtime(plan, live, results, now_s, commands, alarms, handed_back)
    weather = {p.id: p.weather for p in live.snapshot.plants if p.weather is not None}
    analogue = outputs.apply(
        evaluation.outputs,
        live.actuators,
        now,
        offline,
        _raise_control,
        _clear,
        alarms[0],
        weather,
        {p.id: p.name for p in live.snapshot.plants},
    )
    faults += analogue["output_faults"]
    if not offline:
        faults += outputs.watchdogs(
            now_s, results, live.actuators, _raise_control, _clear, alarms[0], live.runtime
        )
    if not offline:
        faults += _node_overdue(now, alarms)
        _forget_disabled_faults()
        _hand_back_disabled(now)
        try:
            # Last: this tick's clears have dropped what no longer stands.
            _raise_held(now)
        except DatabaseError:
            log.exception("control: cannot yet raise the alarms held since the outage")

    zone_out = {}
    specs = {z.id: z for z in live.snapshot.zones}
    for zid, res in evaluation.zones.items():
        data = dict(vars(res))  # flat fields: no deep copy (asdict) per zone per tick
        if any(results.get(a, _OK).error for a in specs[zid].actuator_ids):
            data["flags"] = sorted(set(data["flags"]) | {"actuator_fault"})
        data["evaluated_at"] = now_s
        zone_out[zid] = data
    runtime.save_zones(zone_out)

    learned = 0
    for event in [] if offline else evaluation.events:
        if event.get("kind") == "occupancy_start":
            try:
                from control.optimum import learn_from_event

                learned += learn_from_event(event) is not None
            except Exception:
                # Learning is a refinement: it must never stop the plant being switched.
                log.exception("optimum start learning failed for zone %s", event.get("zone_id"))

    finished = time.perf_counter()
    report = {
        "at": now.isoformat(),
        "zones": len(live.snapshot.zones),
        "decisions": len(plan),
        "written": sum(1 for r in results.values() if r.written),
        "changes": sum(1 for _, kind in plan.values() if kind == CHANGE),
        "corrected": corrected,
        "faults": faults,
        "learned": learned,
        "outputs": len(evaluation.outputs),
        "pulses": analogue["pulses"],
        "snapshot_ms": round((built - started) * 1000, 1),
        "evaluate_ms": round((evaluated - built) * 1000, 1),
        "total_ms": round((finished - started) * 1000, 1),
    }
    if offline:
        report["offline"] = offline
    runtime.save_last_tick(report)
    return report


def _sync_alarms(current: dict[str, str], may_alarm_relays: bool = True) -> None:
    """Raise what the evaluator reports (a lost sensor, ...) once, clear what has ended.
    Which ones are open is kept in Redis, so a steady state costs no database query.

    During the start-up grace no new one is opened: every evaluator alarm says that something
    has not reported or confirmed (a sensor with no reading yet, a valve or heat source whose
    board has not answered), which right after a restart is the restart, not a fault. The tick
    still acts on it (sensor fallback, frost, held stages); an alarm open from before stays."""
    was_open = runtime.open_evaluator_alarms()
    if not may_alarm_relays:
        current = {k: v for k, v in current.items() if k in was_open}
    opened = set(current) - was_open
    closed = was_open - set(current)
    for key in sorted(opened):
        _raise(key, current[key], source="control")
    for key in sorted(closed):
        _clear(key)
    runtime.set_evaluator_alarms(opened, closed)


def _kind(
    state: runtime.ActuatorRuntime,
    decision: Decision,
    now_s: float,
    keepalive: int,
    released: bool = False,
) -> str:
    if released:
        # Handed back: relinquished once (and again after a fault), then the controller's.
        if not state.relinquished:
            return CHANGE
        return RETRY if state.fault else VERIFY
    if state.relinquished or state.on is None or state.on != decision.state:
        return CHANGE
    if state.fault:
        return RETRY
    if state.sent_at is None or now_s - state.sent_at >= keepalive:
        return KEEPALIVE
    return VERIFY


def _build_commands(
    plan, actuators: dict[int, Actuator], now: datetime, states
) -> dict[int, ActuatorCommand]:
    """The audit rows of this tick: one per state change, keep-alive, and one per fault
    episode (a dead relay retried every tick would write a row every tick)."""
    return {
        aid: ActuatorCommand(
            actuator_id=aid,
            state=decision.state,
            reason=_PREFIX[kind] + decision.reason,
            strategy=decision.strategy,
            user_id=decision.user_id,
            requested_at=now,
        )
        for aid, (decision, kind) in plan.items()
        if kind != VERIFY
        # A node's unacknowledged command stays queued: no new one each tick while it waits.
        and not (kind == RETRY and actuators[aid].driver == Actuator.Driver.NODE_QUEUE)
        # A retry is written to the relay every tick, but audited once per fault episode.
        and not (kind == RETRY and states[aid].fault_audited)
    }


def _save_commands(commands: dict[int, ActuatorCommand]) -> str:
    """Audit before sending. Returns why the database is unusable, "" when the rows are in."""
    try:
        ActuatorCommand.objects.bulk_create(commands.values())
    except DatabaseError as exc:
        # It went away after the snapshot was read: the rows wait in Redis instead.
        log.error("control tick: cannot write audit rows, queued in Redis (%s)", exc)
        for row in commands.values():
            row.pk = None
        return "database unavailable while auditing"
    return ""


class _Ok:
    error = ""
    written = False
    confirmed = True


_OK = _Ok()


def _send(
    plan, actuators: dict[int, Actuator], commands, now: datetime, handed_back: set[int]
) -> dict[int, Any]:
    coil_targets = []
    queue_targets = []
    bacnet_targets = []
    results: dict[int, Any] = {}
    for aid, (decision, kind) in plan.items():
        act = actuators[aid]
        if act.driver == Actuator.Driver.BACNET:
            released = aid in handed_back
            if released and kind == VERIFY:
                continue  # the controller's point now: not read until something drives it
            if act.bacnet_device is None:
                results[aid] = modbus.CoilResult(aid, error="no BACnet controller configured")
                continue
            state = None if released else decision.state
            bacnet_targets.append(bacnet.target_for(act, state, write=kind != VERIFY))
        elif act.driver == Actuator.Driver.MODBUS_COIL:
            if not act.host:
                results[aid] = modbus.CoilResult(aid, error="no relay board host configured")
                continue
            coil_targets.append(
                modbus.CoilTarget(
                    aid, act.host, act.port, act.device_id, act.coil, decision.state, kind != VERIFY
                )
            )
        elif act.driver == Actuator.Driver.NODE_QUEUE and aid in commands:
            if commands[aid].pk is None:
                # The node command queue is a table: nothing to queue to while it is away.
                results[aid] = modbus.CoilResult(aid, error="database unavailable: node queue")
                continue
            if act.node_id is None:
                results[aid] = modbus.CoilResult(
                    aid, error="no node configured for the command queue"
                )
                continue
            queue_targets.append(
                node_queue.QueueTarget(aid, act.node_id, decision.state, commands[aid].pk)
            )
            results[aid] = modbus.CoilResult(aid, written=True, sent_at=now.timestamp())
    results.update(
        modbus.apply(
            coil_targets,
            timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
            deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
            attempts=settings.BMS_CONTROL_DEVICE_ATTEMPTS,
        )
    )
    # After the relays: a slow controller must not delay the boiler room's own board.
    results.update(
        bacnet.apply(
            bacnet_targets,
            deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
            timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
        )
    )
    node_queue.enqueue(queue_targets, now)
    return results


# Drivers whose every write is read back by the tick itself (the node queue's is acknowledged
# later, by the node).
_READ_BACK = (Actuator.Driver.MODBUS_COIL, Actuator.Driver.BACNET)


def _audit_results(
    plan, actuators, commands, results, now: datetime, offline: str, handed_back: set[int]
) -> int:
    def at(value: float | None) -> datetime | None:
        return None if value is None else datetime.fromtimestamp(value, UTC)

    # Results of one relay board share their timestamps: one UPDATE per group, not per row
    # (a first tick writes every actuator on site).
    groups: dict[tuple, list[int]] = {}
    for aid, row in commands.items():
        result = results.get(aid)
        if result is None:
            continue
        confirmed = result.confirmed_at if actuators[aid].driver in _READ_BACK else None
        if offline:
            row.sent_at, row.confirmed_at, row.error = (
                at(result.sent_at),
                at(confirmed),
                result.error,
            )
        else:
            groups.setdefault((result.sent_at, confirmed, result.error), []).append(row.pk)
    for (sent, confirmed, error), pks in groups.items():
        ActuatorCommand.objects.filter(pk__in=pks).update(
            sent_at=at(sent), confirmed_at=at(confirmed), error=error
        )
    # Corrections were not planned: audit them now, with what the relay had drifted to.
    extra: list[ActuatorCommand] = []
    recovered: list[ActuatorCommand] = []
    for aid, (decision, kind) in plan.items():
        result = results.get(aid)
        if (
            kind == RETRY
            and aid not in commands
            and actuators[aid].driver in _READ_BACK
            and result is not None
            and not result.error
            and result.confirmed_at is not None
        ):
            # The episode's one audited retry carried the error, so the log read as still
            # failing while the relay was back: the first confirmed write is a row of its own.
            recovered.append(
                ActuatorCommand(
                    actuator_id=aid,
                    state=decision.state,
                    reason=f"Recovered after a fault: "
                    f"{_confirmed_words(actuators[aid], decision, aid in handed_back)}. "
                    f"{decision.reason}",
                    strategy=decision.strategy,
                    user_id=decision.user_id,
                    requested_at=now,
                    sent_at=at(result.sent_at),
                    confirmed_at=at(result.confirmed_at),
                )
            )
    for aid, result in results.items():
        if getattr(result, "corrected", False):
            decision, _ = plan[aid]
            act = actuators[aid]
            why = (
                bacnet.correction_words(
                    act.bacnet_priority, act.bacnet_object, result.found,
                    bacnet.point_value(act, None if aid in handed_back else decision.state),
                )
                if act.driver == Actuator.Driver.BACNET
                else f"Re-asserted: relay read {'ON' if not decision.state else 'OFF'}, "
                f"should be {'ON' if decision.state else 'OFF'} (rebooted or switched by hand?). "
            )  # fmt: skip
            extra.append(
                ActuatorCommand(
                    actuator_id=aid,
                    state=decision.state,
                    reason=why + decision.reason,
                    strategy=decision.strategy,
                    user_id=decision.user_id,
                    requested_at=now,
                    sent_at=at(result.sent_at),
                    confirmed_at=at(result.confirmed_at),
                    error=result.error,
                )
            )
    if offline:
        # Every command is audited: these are written by the first tick that has the database.
        config_cache.queue_audit([*commands.values(), *extra, *recovered])
    else:
        ActuatorCommand.objects.bulk_create([*extra, *recovered])
    return len(extra)


# Set by the first tick after this process's start-up grace (alarms.lifecycle.in_startup_grace):
# faults found during the grace were recorded but not alarmed, so that tick judges them all.
_judged_since_start = False


def _relay_alarms_due(now_s: float) -> tuple[bool, bool]:
    """(may alarm now, must re-judge standing faults) for this tick."""
    global _judged_since_start
    if in_startup_grace(now_s):
        return False, False
    recheck = not _judged_since_start
    _judged_since_start = True
    return True, recheck


def _update_runtime(
    plan, live, results, now_s: float, audited, alarms: tuple[bool, bool], handed_back: set[int]
) -> int:
    updated: dict[int, runtime.ActuatorRuntime] = {}
    faults = 0
    may_alarm, recheck = alarms
    for aid, (decision, _kind) in plan.items():
        before = live.runtime[aid]
        result = results.get(aid)
        act = live.actuators[aid]
        if aid in handed_back:
            after = _handed_back(before, decision, result, now_s, aid in audited)
        else:
            after = _driven(before, decision, result, now_s, aid in audited, act)
        if _differs(before, after):
            updated[aid] = after  # an unchanged state is not rewritten: no Redis write per tick
        fault = after.fault
        if fault:
            faults += 1
            if may_alarm and (not before.fault or recheck):
                if act.driver == Actuator.Driver.MODBUS_COIL:
                    where = f"{act.host}:{act.port} coil {act.coil}"
                elif act.driver == Actuator.Driver.BACNET:
                    where = bacnet.where(act)
                else:
                    where = f"node {act.node_id}"
                what = (
                    "NULL (released)" if aid in handed_back else ("ON" if decision.state else "OFF")
                )
                _raise(
                    alarm_key(aid),
                    f"Actuator '{act.name}' ({where}) did not confirm {what}: {fault}",
                    source="relay",
                )
        elif before.fault and act.driver in _READ_BACK:
            _clear(alarm_key(aid))
        if act.driver == Actuator.Driver.BACNET and may_alarm:
            _priority_alarm(act, result, changed=before.fault != after.fault or recheck)
    runtime.save_actuators(updated)
    return faults


def _priority_alarm(act: Actuator, result, *, changed: bool) -> None:
    """`bacnet-priority:<id>`: a priority above ours holds the output, in the controller's terms.
    Judged only when the output's fault changed (a hold is a fault whose words name the holding
    priority and value), so a standing hold costs no alarm query per tick; an output that did
    not answer keeps what it had."""
    read = getattr(result, "read", None)
    if not changed or read is None:
        return
    message = bacnet.held_words(act, read)
    if message:
        _raise(bacnet.held_key(act.pk), message, source="bacnet", severity=Alarm.Severity.WARNING)
    else:
        _clear(bacnet.held_key(act.pk))


def _handed_back(
    before: runtime.ActuatorRuntime, decision: Decision, result, now_s: float, audited: bool
) -> runtime.ActuatorRuntime:
    """A BACnet output released to its controller: its state is the controller's now, so it is
    unknown to us and never confirmed (an interlock never counts it open), whatever it reads."""
    fault = result.error if result is not None else before.fault
    return replace(
        before,
        on=None,
        changed_at=before.changed_at if before.relinquished else now_s,
        confirmed=False,
        relinquished=True,
        **_decided(before, decision, result, now_s, fault, audited),
    )


def _decided(before, decision: Decision, result, now_s: float, fault: str, audited: bool) -> dict:
    """The runtime fields every served actuator takes from this tick's decision and write."""
    return {
        "sent_at": now_s if (result and result.written) else before.sent_at,
        "fault": fault,
        "reason": decision.reason,
        "strategy": decision.strategy,
        "decided_at": now_s,
        "owner": decision.owner,
        "released_from": decision.released_from,
        # The episode's audit row: written this tick, or already (see _build_commands).
        "fault_audited": bool(fault) and (before.fault_audited or audited),
    }


def _driven(
    before: runtime.ActuatorRuntime, decision: Decision, result, now_s: float, audited: bool, act
) -> runtime.ActuatorRuntime:
    """An actuator we drive: its state as this tick's write and read-back left it."""
    switched = before.on != decision.state
    if act.driver == Actuator.Driver.NODE_QUEUE:
        confirmed = before.confirmed and not (result and result.written)
        fault = result.error if result and result.error else before.fault
    else:
        confirmed = bool(result and result.confirmed)
        fault = result.error if result else ""
    last_on_at = now_s if (switched and decision.state) else before.last_on_at
    on_confirmed_at = before.on_confirmed_at
    if decision.state and confirmed and not fault:
        # Once per on-period: a steady ON is not a Redis write per tick.
        if on_confirmed_at is None or (last_on_at is not None and on_confirmed_at < last_on_at):
            on_confirmed_at = now_s
    # From an unknown state to OFF is no switch-off for the minimum off time: nothing is
    # known to have run (no timer holds an unknown actuator). Else a boiler first driven
    # OFF while its zone's valve opens waited 10 min to fire.
    from_unknown_off = before.on is None and not decision.state
    return runtime.ActuatorRuntime(
        on=decision.state,
        changed_at=now_s if switched and not from_unknown_off else before.changed_at,
        last_off_at=now_s if (switched and not decision.state) else before.last_off_at,
        last_on_at=last_on_at,
        on_confirmed_at=on_confirmed_at,
        confirmed=confirmed,
        **_decided(before, decision, result, now_s, fault, audited),
    )


def _forget_disabled_faults() -> None:
    """A disabled actuator is never switched, so its relay alarm no longer applies: clear it
    (else alarms of actuators out of control stay open for ever)."""
    disabled = dict(Actuator.objects.filter(enabled=False).values_list("pk", "name"))
    if not disabled:
        return
    states = runtime.load_actuators(list(disabled))
    changed = {}
    for aid, state in states.items():
        if state.fault or state.owner:
            if state.fault:
                _clear(alarm_key(aid))
            state.fault, state.fault_audited, state.confirmed = "", False, False
            state.released_from = state.owner or state.released_from
            state.owner = ""
            state.reason = "Actuator disabled: never switched, not read back"
            changed[aid] = state
    runtime.save_actuators(changed)


def _hand_back_disabled(now: datetime) -> None:
    """A disabled BACnet output is never switched again, but our last write would hold its
    point at our priority for ever, against the controller's own logic: it is relinquished
    (audited), and tried again every keep-alive period until the controller confirms it."""
    found = Actuator.objects.filter(enabled=False, driver=Actuator.Driver.BACNET)
    acts = list(found.exclude(bacnet_device=None).select_related("bacnet_device__node"))
    if not acts:
        return
    states = runtime.load_actuators([a.pk for a in acts])
    now_s = now.timestamp()
    due = [
        a
        for a in acts
        if not states[a.pk].relinquished
        # At once when disabled; then, while it fails, once per keep-alive (one row each).
        and (
            states[a.pk].strategy != "disabled"
            or states[a.pk].sent_at is None
            or now_s - states[a.pk].sent_at >= settings.BMS_CONTROL_KEEPALIVE
        )
    ]
    if not due:
        return
    rows = {
        a.pk: ActuatorCommand.objects.create(
            actuator_id=a.pk,
            state=False,
            reason=f"Actuator disabled: NULL at priority {a.bacnet_priority}, so the "
            f"controller's own logic has {a.bacnet_object} again",
            strategy="disabled",
            requested_at=now,
        )
        for a in due
    }
    results = bacnet.apply(
        [bacnet.target_for(a, None) for a in due],
        deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
        timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
    )
    for a in due:
        result, state = results[a.pk], states[a.pk]
        ActuatorCommand.objects.filter(pk=rows[a.pk].pk).update(
            sent_at=None if result.sent_at is None else datetime.fromtimestamp(result.sent_at, UTC),
            confirmed_at=None
            if result.confirmed_at is None
            else datetime.fromtimestamp(result.confirmed_at, UTC),
            error=result.error,
        )
        state.sent_at, state.strategy = now_s, "disabled"
        if result.confirmed:
            state.relinquished, state.on, state.confirmed = True, None, False
            state.reason = rows[a.pk].reason
        else:
            log.warning("control: disabled BACnet output '%s' not handed back: %s", a.name,
                        result.error)  # fmt: skip
    runtime.save_actuators({a.pk: states[a.pk] for a in due})


def _differs(before: runtime.ActuatorRuntime, after: runtime.ActuatorRuntime) -> bool:
    return {**before.__dict__, "decided_at": None} != {**after.__dict__, "decided_at": None}


def _node_overdue(now: datetime, alarms: tuple[bool, bool]) -> int:
    overdue = node_queue.overdue(now, settings.BMS_CONTROL_NODE_ACK_TIMEOUT)
    if not overdue:
        return 0
    # Fresh from Redis: this tick's state was saved a moment ago.
    states = runtime.load_actuators([c.actuator_id for c in overdue])
    changed = {}
    for cmd in overdue:
        minutes = round((now - cmd.created).total_seconds() / 60)
        message = f"node '{cmd.node}' has not picked up its command for {minutes} min"
        state = states[cmd.actuator_id]
        may_alarm, recheck = alarms
        if may_alarm and (not state.fault or recheck):
            raise_alarm(
                alarm_key(cmd.actuator_id),
                f"Actuator '{cmd.actuator.name}' did not confirm {'ON' if cmd.state else 'OFF'}: {message}",
                source="relay",
                severity=Alarm.Severity.CRITICAL,
            )
        state.fault = message
        state.confirmed = False
        changed[cmd.actuator_id] = state
    runtime.save_actuators(changed)
    return len(changed)


def _confirmed_words(act: Actuator, decision: Decision, released: bool) -> str:
    if act.driver == Actuator.Driver.BACNET:
        what = "NULL" if released else ("ON" if decision.state else "OFF")
        return f"controller confirmed {what} at priority {act.bacnet_priority}"
    return f"relay confirmed {'ON' if decision.state else 'OFF'}"


# --- the database outage ---------------------------------------------------------------------


def _hhmm(value: datetime) -> str:
    return timezone.localtime(value).strftime("%H:%M")


def _raise(key: str, message: str, source: str, severity: str = Alarm.Severity.CRITICAL) -> None:
    """raise_alarm, or, while the database is away, a Redis note to raise it when it is back."""
    try:
        raise_alarm(key, message, source=source, severity=severity)
    except DatabaseError as exc:
        log.critical("ALARM %s (not recorded, database unavailable: %s): %s", key, exc, message)
        config_cache.queue_alarm(key, {"raise": message, "source": source, "severity": severity})


def _clear(key: str) -> None:
    config_cache.drop_held(key)  # a held outage alarm whose condition ended is never raised
    try:
        clear_alarm(key)
    except DatabaseError as exc:
        log.error("cannot clear alarm %s, database unavailable (%s): queued", key, exc)
        config_cache.queue_alarm(key, {"clear": True})


def _raise_control(key: str, message: str) -> None:
    _raise(key, message, source="control")


def _alarm_offline(key: str, message: str) -> None:
    _raise(key, message, source="control")


def outage_alarm_grace_s() -> float:
    """How long alarms raised during a database outage are held once it is back
    (BMS_CONTROL_OUTAGE_ALARM_GRACE_S, 300 s: gateways resend what they buffered and the ingest
    catches up), so only those still standing are raised."""
    return float(getattr(settings, "BMS_CONTROL_OUTAGE_ALARM_GRACE_S", 300))


def _raise_held(now: datetime) -> int:
    """Raise the held outage alarms that are due and were not cleared meanwhile (a clear drops
    one from the hold: _clear). Returns how many were raised."""
    raised = 0
    for key, action in config_cache.held_alarms().items():
        if action["due"] > now.timestamp():
            continue
        raise_alarm(
            key,
            f"{action['raise']} (since the database outage)",
            source=action["source"],
            severity=action.get("severity", Alarm.Severity.CRITICAL),
        )
        config_cache.drop_held(key)
        raised += 1
    return raised


def _catch_up(now: datetime) -> None:
    """The database answers again: write what waited in Redis, then close the outage."""
    waiting = config_cache.pending_audit()
    if waiting:
        with transaction.atomic():
            ActuatorCommand.objects.bulk_create(ActuatorCommand(**row) for row in waiting)
        config_cache.drop_audit(len(waiting))
        log.warning("control: wrote %d audit rows queued while the database was away", len(waiting))
    analogue = config_cache.pending_analogue()
    if analogue:
        # A plant deleted meanwhile (its rows are PROTECTed, but none were in the database yet)
        # must not block the queue for ever: its rows go to the log instead.
        plants = {row["plant_id"] for row in analogue}
        known = set(HeatingPlant.objects.filter(pk__in=plants).values_list("pk", flat=True))
        for row in analogue:
            if row["plant_id"] not in known:
                log.error("control: output audit row of deleted plant %s: %s", row["plant_id"],
                          row["reason"])  # fmt: skip
        with transaction.atomic():
            AnalogueCommand.objects.bulk_create(
                AnalogueCommand(**row) for row in analogue if row["plant_id"] in known
            )
        config_cache.drop_analogue(len(analogue))
        log.warning(
            "control: wrote %d output audit rows queued while the database was away", len(analogue)
        )
    grace = outage_alarm_grace_s()
    for key, action in config_cache.pending_alarms().items():
        if "raise" in action and not key.startswith("control-db:") and grace > 0:
            # Raised during the outage, often because of it (readings stopped arriving, so
            # every zone's sensor went stale): all of them at the return were a burst of alarms
            # cleared a minute later. Held; raised after the grace only if still standing.
            config_cache.hold_alarm(key, action, now.timestamp() + grace)
        elif "raise" in action:
            raise_alarm(
                key,
                action["raise"],
                source=action["source"],
                severity=action.get("severity", Alarm.Severity.CRITICAL),
            )
        else:
            clear_alarm(key)
            config_cache.drop_held(key)
        config_cache.drop_alarm(key)
    outage = config_cache.outage()
    if outage is None:
        return
    for kind in ("unavailable", "no-cache"):
        # The condition is over: the alarm stays in the history (and was emailed when raised).
        clear_alarm(db_alarm_key(kind))
    log.warning(
        "control: database back at %s after an outage from %s (%d ticks)",
        _hhmm(now),
        _hhmm(outage["since"]),
        outage["ticks"],
    )
    config_cache.end_outage()
