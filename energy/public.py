"""A building's figures fit for a public screen (the kiosk panels of displays/ read these).

Only totals leave here: kWh, kg CO2e, the model's figure and the period. Never a meter's or
feed's name or id, a tariff or money, so a screen in the entrance hall shows what the building
used, not how it is metered or what the site pays. docs/ENERGY.md "Kiosk panels".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from energy import consumption, degree_days, refresh, report
from energy.models import EnergySite, Meter, MeterNode

SAVED_PERIODS = {"30d": 30, "90d": 90, "365d": 365}
MAX_TERM_DEPTH = 8


def _physical(meter: Meter, by_id: dict[int, Meter], sign: int = 1, depth: int = 0) -> list:
    """A meter as signed physical meters: a virtual one expanded through its terms."""
    if meter.source != Meter.Source.VIRTUAL:
        return [(meter, sign)]
    if depth >= MAX_TERM_DEPTH:  # validation refuses cycles; never recurse without end
        return []
    out = []
    for term in meter.terms.all():
        src = by_id.get(term.source_id)
        if src is not None:
            out.extend(_physical(src, by_id, sign * term.sign, depth + 1))
    return out


def today_against_model(node: MeterNode, now: float) -> dict:
    """Energy (kWh: electricity, gas, heat, oil) the building has used today up to the last
    whole hour, and what its model expects by then: the day's expected use times the share of
    a day's use the building had used by this hour on the same weekday of the last four weeks
    (its own daily profile: heating from 06:00 makes the early hours small), or pro rata by
    the hours passed when those days have no data (docs/ENERGY.md "Kiosk panels")."""
    site = node.site
    tz = refresh.site_zone(site)
    zone = ZoneInfo(tz)
    today = datetime.fromtimestamp(now, zone).date()
    midnight, next_midnight = consumption.local_bounds(today, today, tz)
    until = int(now) // refresh.HOUR * refresh.HOUR
    hours = (until - midnight) / 3600
    out = {"day": today.isoformat(), "hours": hours, "unit": "kWh", "value": None,
           "expected": None, "expected_day": None, "status": consumption.GAP}  # fmt: skip
    tree = report.Tree.load(site)
    by_id = {m.pk: m for ms in tree.meters.values() for m in ms}
    total, status, expected_day, any_meter = 0.0, consumption.MEASURED, 0.0, False
    # One feed read per meter for today and the same weekday of the last weeks (the profile).
    bounds = profile_bounds(today, until, tz) + [midnight, until]
    profiles: list[tuple[int, list] | None] = []  # (sign, usage) per meter; None: no feed
    hdd = _hdd_so_far(site, midnight, until, tz) if until > midnight else None
    for fuel in report.ENERGY_FUELS:
        ids = tree.meters_for(node.pk, fuel)
        if not ids:
            continue
        any_meter = True
        if until > midnight:
            for meter, sign in (p for i in ids for p in _physical(by_id[i], by_id)):
                if meter.feed_id is None:  # its feed was deleted: today is not known
                    profiles.append(None)
                    status = consumption.GAP
                    continue
                usage = refresh.feed_usage(meter, bounds, tz, now)
                profiles.append((sign, usage))
                u = usage[-1]  # midnight to the last whole hour
                if u.value is None:
                    status = consumption.GAP
                else:
                    total += sign * u.value
                    status = consumption.worst(status, u.status)
        # the same baseline as the staff page: none when the weather explains too little
        line = report.baseline_for(tree, node, fuel, today).line
        ((e, _src),) = report.expected_daily(node, fuel, [today], {today: hdd}, line)
        expected_day = None if e is None or expected_day is None else expected_day + e
    if not any_meter or until <= midnight:
        return out
    out["expected_day"] = _r(expected_day)
    if expected_day is not None:
        share = share_of_day(profiles)
        out["expected_basis"] = "profile" if share is not None else "hours"
        if share is None:
            share = (until - midnight) / (next_midnight - midnight)
        out["expected"] = _r(expected_day * share)
    if status != consumption.GAP:
        out.update(value=_r(total), status=status)
    return out


PROFILE_WEEKS = 4


def profile_bounds(today, until: int, tz: str) -> list[int]:
    """For each of the PROFILE_WEEKS same weekdays before `today`: its midnight, the same local
    hour as `until`, and its closing midnight (usage between them: so far, and the rest)."""
    zone = ZoneInfo(tz)
    hour = datetime.fromtimestamp(until, zone).hour
    bounds: list[int] = []
    for k in range(PROFILE_WEEKS, 0, -1):
        day = today - timedelta(days=7 * k)
        start, end = consumption.local_bounds(day, day, tz)
        cut = int(datetime(day.year, day.month, day.day, hour, tzinfo=zone).timestamp())
        bounds += [start, cut, end]
    return bounds


def share_of_day(profiles: list[tuple[int, list] | None]) -> float | None:
    """Share of a whole day's use that the meters had used by this hour, over the same weekday
    of the last PROFILE_WEEKS weeks (weeks with a gap in any meter left out). `profiles`: each
    meter's sign and its usage between `profile_bounds` (and beyond: ignored).

    None when a meter has no feed, no week is complete or the share is not between 0 and 1 (no
    use, or a virtual meter's terms cancelling): the caller falls back to the hours passed."""
    if not profiles or any(p is None for p in profiles):
        return None
    so_far = [0.0] * PROFILE_WEEKS
    whole = [0.0] * PROFILE_WEEKS
    complete = [True] * PROFILE_WEEKS
    for sign, usage in profiles:
        for k in range(PROFILE_WEEKS):
            before, after = usage[3 * k], usage[3 * k + 1]  # usage[3k+2]: the days between
            if before.value is None or after.value is None:
                complete[k] = False
                continue
            so_far[k] += sign * before.value
            whole[k] += sign * (before.value + after.value)
    a = sum(x for x, ok in zip(so_far, complete, strict=True) if ok)
    b = sum(x for x, ok in zip(whole, complete, strict=True) if ok)
    if not any(complete) or b <= 0 or not 0 <= a <= b:
        return None
    return a / b


def _hdd_so_far(site, start: int, end: int, tz: str) -> float | None:
    """Degree days of the hours so far as if the day went on like them (for the baseline)."""
    row = EnergySite.objects.filter(site=site).first()
    if row is None or row.outside_temperature_feed_id is None:
        return None
    step = refresh.window_step(tz, [start, end])
    t, v = refresh.read_windows(
        row.outside_temperature_feed_id, start, end, step, average=True, delta=False, tz=tz
    )
    (mean,) = degree_days.daily_means(t, v, [start, end])
    return degree_days.heating_degree_days(mean, row.hdd_base_c)


def co2_saved(node: MeterNode, period: str, now: float) -> dict:
    """kg CO2e and kWh the building saved against its model over the last whole days of
    `period` (yesterday back), summed over its energy fuels (report.node_report's savings:
    grid electricity at each day's carbon factor)."""
    tz = refresh.site_zone(node.site)
    last = datetime.fromtimestamp(now, ZoneInfo(tz)).date() - timedelta(days=1)
    first = last - timedelta(days=SAVED_PERIODS[period] - 1)
    tree = report.Tree.load(node.site)
    kg = kwh = 0.0
    found = False
    for fuel in report.ENERGY_FUELS:
        if not tree.meters_for(node.pk, fuel):
            continue
        figures = report.node_report(tree, node, fuel, first, last, "year")
        if figures["expected_total"] is None:
            continue
        found = True
        kg += figures["savings"]["kg_co2e"] or 0.0
        kwh += figures["savings"]["kwh"] or 0.0
    return {"unit": "kg", "value": _r(kg) if found else None, "kwh": _r(kwh) if found else None,
            "first": first.isoformat(), "last": last.isoformat(), "period": period}  # fmt: skip


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)
