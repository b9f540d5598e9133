"""The energy rules, each finding its points through the site model (docs/FINDINGS.md):

- electricity meters (energy.Meter, fuel electricity, with a feed): out-of-hours base load;
- buildings (energy.MeterNode) with their meters and model: use above the model, judged on
  the energy app's own daily CUSUM (energy.report.node_report), not a second copy of it;
- generation meters marked as PV arrays (Meter.generator): yield against the array's own
  clear-day envelope, or against its sibling arrays at the site;
- generation meters marked as hydro turbines with a flow feed (Meter.flow_feed).

Each check is `check(start, end, log) -> [Trip]` as findings/evaluate.py runs them; the
conditions are pure (findings/energy_detect.py) and every figure is in findings/rules.py.
History before the range (the weeks a rule compares with) is read here, at hourly means, at
most a few weeks (840 points) a feed.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings

from core.words import counted
from energy import benchmarks, report
from energy.models import Meter, MeterNode
from feeds.store import service as feed_service
from findings import detect, points, rules
from findings import energy_detect as ed

WEEK = timedelta(days=7)
HOUR_S = 3600
ENERGY_URL = "/staff/energy/"


def _tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def hourly(feed_id: int, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """The feed's hourly means over [start, end) (from the hour `start` falls in), in local
    time; hours with no reading left out."""
    t0 = int(start.timestamp()) // HOUR_S * HOUR_S
    t1 = int(end.timestamp())
    rows = feed_service.read(feed_id, t0, t1, HOUR_S, average=True)
    tz = _tz()
    # the read includes the window that starts at `end`: an hour not yet judged (in a live run
    # one barely begun; in a replayed month one from the run's future)
    return [
        (datetime.fromtimestamp(t / 1000, tz), float(v))
        for t, v in rows
        if v is not None and t < t1 * 1000
    ]


def meter_kw(meter: Meter, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """The meter's mean kW in each hour: a power feed's hourly mean, or the rise of a
    register's hourly means from one hour to the next (kWh in an hour = mean kW)."""
    scale = meter.feed_scale
    if meter.source == Meter.Source.POWER:
        return [(t, v * scale / 1000) for t, v in hourly(meter.feed_id, start, end)]
    rows = hourly(meter.feed_id, start - timedelta(hours=1), end)
    return [
        (t1, (v1 - v0) * scale)
        for (t0, v0), (t1, v1) in zip(rows, rows[1:], strict=False)
        if (t1 - t0).total_seconds() == HOUR_S and v1 >= v0  # a reset is not use
    ]


def _meters(rule: rules.Rule, log: points.CommandLog, kind: str, rows=None) -> list[Meter]:
    """The meters the rule judges, found by Brick class in the site's model (the meter
    itself, kind "meter", or the generator it meters, "generator"), with a feed of their own."""
    if rows is None:
        rows = Meter.objects.all()
    rows = (
        rows.exclude(source=Meter.Source.VIRTUAL)
        .exclude(feed__isnull=True)
        .select_related("feed", "node__site")
    )
    return [m for m, _points in points.bound(rule, log, Meter, rows, kind=kind)]


def _split(series, start: datetime):
    return [r for r in series if r[0] < start], [r for r in series if r[0] >= start]


def _meter_subject(meter: Meter, what: str) -> str:
    return f"{what} '{meter.name}' ({meter.node.name})"


def base_load_rising(start: datetime, end: datetime, log: points.CommandLog) -> list[points.Trip]:
    rule = rules.RULES[rules.BASE_LOAD_RISING]
    trips = []
    for meter in _meters(rule, log, "meter"):
        first = start - rules.BASE_LOAD_WEEKS * WEEK
        ooh = [
            (t, kw)
            for t, kw in meter_kw(meter, first, end)
            if ed.out_of_hours(t, opens=rules.OPENS_HOUR, closes=rules.CLOSES_HOUR)
        ]

        def base(lo: datetime, hi: datetime, rows=ooh) -> float | None:
            return ed.low_percentile(
                [kw for t, kw in rows if lo <= t < hi],
                rules.BASE_LOAD_PERCENTILE,
                rules.BASE_LOAD_MIN_HOURS,
            )

        weeks = range(1, rules.BASE_LOAD_WEEKS + 1)
        before = [base(start - k * WEEK, start - (k - 1) * WEEK) for k in weeks]
        bars = {
            "min_weeks": rules.BASE_LOAD_MIN_WEEKS,
            "min_rise_kw": rules.BASE_LOAD_MIN_RISE_KW,
            "min_rise_ratio": rules.BASE_LOAD_MIN_RISE_RATIO,
        }
        found = ed.base_load_rise(base(start, end), before, **bars)
        what, against = "Out-of-hours base load", "in"
        if found is None:
            found = last_night(ooh, start, before, bars)
            what, against = "Out-of-hours base load on the last night", "on the nights of"
        if found is None:
            continue
        high = [t for t, kw in ooh if t >= start and kw >= found.before_kw + found.rise_kw / 2]
        spans = [detect.Span(min(high), max(high) + timedelta(hours=1))] if high else []
        trips.append(
            points.Trip(
                key=f"{rule.name}:meter:{meter.pk}",
                rule=rule.name,
                subject=_meter_subject(meter, "Electricity meter"),
                subject_url=ENERGY_URL,
                site=meter.node.site,
                spans=spans or [detect.Span(start, end)],
                detail=f"{what} {found.now_kw:.2f} kW against {found.before_kw:.2f} kW {against} "
                f"the {found.weeks} weeks before (+{found.rise_kw:.2f} kW)",
                evidence=[{"feed": meter.feed_id, "name": meter.name}],
                kwh=found.rise_kw * out_of_hours_in(start, end),
                fuel=benchmarks.ELECTRICITY,
            )
        )
    return trips


def last_night(
    ooh: list[tuple[datetime, float]],
    start: datetime,
    before: list[float | None],
    bars: dict[str, float],
) -> ed.BaseLoad | None:
    """The short look: the range's last NIGHT_HOURS out-of-hours hours against the nights
    before the range (ed.night_base_rise), when the weekly look has history enough to judge
    (`before`: its previous weeks' bases). The cost is the weekly look's (the rise over every
    out-of-hours hour): a step, once found, is paid for every night until someone turns it
    off."""
    weeks = sum(b is not None for b in before)
    if weeks < bars["min_weeks"]:
        return None
    night = [kw for t, kw in ooh if t >= start][-rules.NIGHT_HOURS :]
    nights = ed.chunks([kw for t, kw in ooh if t < start], rules.NIGHT_HOURS)
    found = ed.night_base_rise(
        night,
        nights,
        q=rules.BASE_LOAD_PERCENTILE,
        min_hours=rules.NIGHT_MIN_HOURS,
        above_q=rules.NIGHT_ABOVE_PERCENTILE,
        min_rise_kw=bars["min_rise_kw"],
        min_rise_ratio=bars["min_rise_ratio"],
    )
    return None if found is None else ed.BaseLoad(found.now_kw, found.before_kw, weeks)


def out_of_hours_in(start: datetime, end: datetime) -> int:
    """Out-of-hours clock hours in [start, end): 108 in any whole week."""
    tz, n = _tz(), 0
    t = datetime.fromtimestamp(int(start.timestamp()) // HOUR_S * HOUR_S, tz)
    while t < end:
        n += ed.out_of_hours(t.astimezone(tz), opens=rules.OPENS_HOUR, closes=rules.CLOSES_HOUR)
        t += timedelta(hours=1)
    return n


def whole_days(start: datetime, end: datetime) -> tuple[date, date]:
    """The first and last local days wholly inside [start, end) (first > last: none)."""
    tz = _tz()
    s, e = start.astimezone(tz), end.astimezone(tz)
    first = s.date() if s.time() == time(0) else s.date() + timedelta(days=1)
    return first, e.date() - timedelta(days=1)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), _tz())


def above_model(start: datetime, end: datetime, log: points.CommandLog) -> list[points.Trip]:
    rule = rules.RULES[rules.ABOVE_MODEL]
    first, last = whole_days(start, end)
    if first > last:
        return []
    trips, trees = [], {}
    buildings = MeterNode.objects.select_related("site")
    for node, _meters_of in points.bound(rule, log, MeterNode, buildings, kind="place"):
        tree = trees.get(node.site_id) or trees.setdefault(
            node.site_id, report.Tree.load(node.site)
        )
        for fuel in tree.fuels(node.pk):
            if fuel not in report.ENERGY_FUELS:
                continue
            # the energy page's own figures: actual, expected and the CUSUM of each day
            days = report.node_report(tree, node, fuel, first, last, "day")["rows"]
            runs = ed.cusum_rising(
                [(date.fromisoformat(r["start"]), r["cusum"], r["expected"]) for r in days],
                min_days=rules.ABOVE_MODEL_DAYS,
                day_margin=rules.ABOVE_MODEL_MARGIN,
            )
            if not runs:
                continue
            excess = sum(r.excess for r in runs)
            expected = sum(r.expected for r in runs)
            meters = [m for m in tree.meters.get(node.pk, ()) if m.fuel == fuel and m.feed_id]
            trips.append(
                points.Trip(
                    key=f"{rule.name}:node:{node.pk}:{fuel}",
                    rule=rule.name,
                    subject=f"Building '{node.name}' ({fuel})",
                    subject_url=ENERGY_URL,
                    site=node.site,
                    spans=[
                        detect.Span(_midnight(r.first), _midnight(r.last + timedelta(days=1)))
                        for r in runs
                    ],
                    detail=f"{excess:.0f} kWh above its model ({100 * excess / expected:.0f} % "
                    f"over {expected:.0f} kWh expected) on "
                    f"{counted(sum(r.days for r in runs), 'day')} "
                    "in a row",
                    evidence=[{"feed": m.feed_id, "name": m.name} for m in meters[:5]],
                    kwh=excess,
                    fuel=fuel,
                )
            )
    return trips


# (meter, this range's hourly kW, the weeks before's, kWh now, kWh before in as many hours)
Array = tuple[Meter, list[tuple[datetime, float]], list[tuple[datetime, float]], float, float]


def pv_low_yield(start: datetime, end: datetime, log: points.CommandLog) -> list[points.Trip]:
    rule = rules.RULES[rules.PV_LOW_YIELD]
    first = start - rules.PV_WEEKS * WEEK
    arrays: list[Array] = []
    for meter in _meters(rule, log, "generator"):
        before, now = _split(meter_kw(meter, first, end), start)
        if len(now) < 24 or len(before) < 7 * 24:
            continue  # under a day of this range or a week of history: nothing to judge
        now_kwh = sum(kw for _t, kw in now)
        before_kwh = sum(kw for _t, kw in before) / len(before) * len(now)
        arrays.append((meter, now, before, now_kwh, before_kwh))
    trips = []
    for meter, now, before, now_kwh, before_kwh in arrays:
        siblings = [
            n / b
            for m, _n, _b, n, b in arrays
            if m.pk != meter.pk and m.node.site_id == meter.node.site_id and b > 0
        ]
        span = detect.Span(now[0][0], now[-1][0] + timedelta(hours=1))
        if siblings:
            found = ed.sibling_shortfall(
                now_kwh, before_kwh, siblings, min_share=rules.PV_SIBLING_SHARE
            )
            if found is not None:
                missing = found.missing_kwh
                detail = (
                    f"Made {now_kwh:.0f} kWh, {100 * found.ratio:.0f} % of its past rate, while "
                    f"its sibling arrays made {100 * found.reference:.0f} % of theirs"
                )
            else:
                day = bright_day(meter, now, before, arrays, end)
                if day is None:
                    continue
                # the share it fell short by on the bright hours, over what it made in as
                # many hours before: what a week of it costs if it goes on
                missing = (1 - day.share) * before_kwh
                span = detect.Span(day.hours[0], day.hours[-1] + timedelta(hours=1))
                detail = (
                    f"On {len(day.hours)} bright hours of the last day it made "
                    f"{100 * day.share:.0f} % of what its sibling arrays made, each against "
                    "its own clear-day envelope"
                )
        else:
            ratio = ed.envelope_ratio(now, before, daylight_share=rules.PV_DAYLIGHT_SHARE)
            if ratio is None or ratio >= rules.PV_ENVELOPE_SHARE:
                continue
            # every hour lowered alike: its yield scaled up to the envelope is what it should
            # have made (a dead array: its past rate)
            missing = now_kwh * (1 / ratio - 1) if ratio > 0 else before_kwh
            detail = (
                f"Made {now_kwh:.0f} kWh; its best hours reached {100 * ratio:.0f} % of its clear-day "
                "envelope"
            )
        trips.append(
            points.Trip(
                key=f"{rule.name}:meter:{meter.pk}",
                rule=rule.name,
                subject=_meter_subject(meter, "PV array"),
                subject_url=ENERGY_URL,
                site=meter.node.site,
                spans=[span],
                detail=detail,
                evidence=[{"feed": meter.feed_id, "name": meter.name}],
                kwh=missing,
                fuel=benchmarks.ELECTRICITY,
            )
        )
    return trips


def bright_day(
    meter: Meter, now: ed.Hourly, before: ed.Hourly, arrays: list[Array], end: datetime
) -> ed.DayShortfall | None:
    """The short look at a PV array with siblings: its last PV_DAY_HOURS against each sibling
    at the site on that sibling's bright hours (ed.bright_hours_shortfall), each against its
    own clear-day envelope. Found when most siblings find it short (one sibling alone in
    the sun under a passing gap in the clouds is not enough; a sibling with too few bright
    hours counts as not finding it); the middle one of their verdicts is reported."""
    since = end - timedelta(hours=rules.PV_DAY_HOURS)
    day = [(t, kw) for t, kw in now if t >= since]
    envelope = ed.profile_max(before)
    found = []
    for m, sib_now, sib_before, _n, _b in arrays:
        if m.pk == meter.pk or m.node.site_id != meter.node.site_id:
            continue
        found.append(
            ed.bright_hours_shortfall(
                day,
                envelope,
                [(t, kw) for t, kw in sib_now if t >= since],
                ed.profile_max(sib_before),
                bright_share=rules.PV_BRIGHT_SHARE,
                daylight_share=rules.PV_DAYLIGHT_SHARE,
                min_hours=rules.PV_BRIGHT_MIN_HOURS,
                min_share=rules.PV_SIBLING_SHARE,
            )
        )
    judged = sorted((f for f in found if f is not None), key=lambda f: f.share)
    if 2 * len(judged) <= len(found):
        return None
    return judged[len(judged) // 2]


def hydro_no_output(start: datetime, end: datetime, log: points.CommandLog) -> list[points.Trip]:
    rule = rules.RULES[rules.HYDRO_NO_OUTPUT]
    first = start - rules.HYDRO_WEEKS * WEEK
    trips = []
    for meter in _meters(rule, log, "generator", Meter.objects.select_related("flow_feed")):
        power_before, power = _split(meter_kw(meter, first, end), start)
        flow_before, flow = _split(hourly(meter.flow_feed_id, first, end), start)
        found = ed.absent_with_flow(
            power,
            flow,
            power_before,
            flow_before,
            running_share=rules.HYDRO_RUNNING_SHARE,
            flow_quantile=rules.HYDRO_FLOW_QUANTILE,
            min_hours=rules.HYDRO_MIN_HOURS,
            flow_band=rules.HYDRO_FLOW_BAND,
        )
        if found is None:
            continue
        spans = detect.union(detect.Span(t, t + timedelta(hours=1)) for t in found.hours)
        flow_name = meter.flow_feed.name or f"feed {meter.flow_feed_id}"
        trips.append(
            points.Trip(
                key=f"{rule.name}:meter:{meter.pk}",
                rule=rule.name,
                subject=_meter_subject(meter, "Hydro turbine"),
                subject_url=ENERGY_URL,
                site=meter.node.site,
                spans=spans,
                detail=f"No output for {len(found.hours)} h in {counted(len(spans), 'spell')} "
                "while the "
                f"flow was at or above what it runs on; about {found.missing_kwh:.0f} kWh "
                "not generated",
                evidence=[
                    {"feed": meter.feed_id, "name": meter.name},
                    {"feed": meter.flow_feed_id, "name": flow_name},
                ],
                kwh=found.missing_kwh,
                fuel=benchmarks.ELECTRICITY,
            )
        )
    return trips
