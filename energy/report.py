"""The figures the energy page and API show, from MeterDay, ExpectedUse and the weather feed.

One site's tree is loaded once (Tree) so a page asks the database a handful of times, not once
per node. Methods are in docs/ENERGY.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np
from django.db import connection

from energy import baseline, benchmarks, consumption, dec, degree_days, regression, wording
from energy.models import (
    EnergySite,
    ExpectedUse,
    FuelRate,
    GridCarbonPeriod,
    Meter,
    MeterDay,
    MeterNode,
)
from energy.refresh import read_windows, site_zone, window_step

MAX_RANGE_DAYS = 1100
ENERGY_FUELS = (benchmarks.ELECTRICITY, benchmarks.GAS, benchmarks.HEAT, benchmarks.OIL)


def days_between(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


@dataclass
class Tree:
    site: object
    nodes: dict[int, MeterNode]
    children: dict[int | None, list[int]]
    meters: dict[int, list[Meter]] = field(default_factory=dict)

    @classmethod
    def load(cls, site) -> Tree:
        nodes = {n.pk: n for n in MeterNode.objects.filter(site=site)}
        children: dict[int | None, list[int]] = defaultdict(list)
        for n in sorted(nodes.values(), key=lambda n: n.name):
            children[n.parent_id].append(n.pk)
        meters: dict[int, list[Meter]] = defaultdict(list)
        for m in Meter.objects.filter(node__site=site).order_by("name"):
            meters[m.node_id].append(m)
        return cls(site, nodes, children, meters)

    def fuels(self, node_id: int) -> list[str]:
        found: set[str] = set()
        stack = [node_id]
        while stack:
            n = stack.pop()
            found.update(m.fuel for m in self.meters.get(n, ()))
            stack.extend(self.children.get(n, ()))
        return [f for f in benchmarks.FUELS if f in found]

    def meters_for(self, node_id: int, fuel: str) -> list[int]:
        """The meters whose sum is the node's use of `fuel`: its own counting meters, else
        its children's (a building with a main meter is not also the sum of its rooms)."""
        own = [m.pk for m in self.meters.get(node_id, ()) if m.fuel == fuel and m.counts_to_node]
        if own:
            return own
        out: list[int] = []
        for child in self.children.get(node_id, ()):
            out.extend(self.meters_for(child, fuel))
        return out

    def buildings(self) -> list[MeterNode]:
        return [n for n in self.nodes.values() if n.kind == MeterNode.Kind.BUILDING]

    def separable_meters(self, node_id: int) -> list[Meter]:
        """Meters marked as a TM46 separable use in the node and below it, not inside another
        building (a meter's building is its nearest: MeterNode.building)."""
        out: list[Meter] = []
        stack = [node_id]
        while stack:
            n = stack.pop()
            out.extend(m for m in self.meters.get(n, ()) if m.separable_use.strip())
            stack.extend(
                c for c in self.children.get(n, ())
                if self.nodes[c].kind != MeterNode.Kind.BUILDING
            )  # fmt: skip
        return sorted(out, key=lambda m: m.pk)


def daily_use(
    meter_ids: list[int], first: date, last: date
) -> list[tuple[date, float | None, str]]:
    """The sum of the meters per day; a day any meter lacks is a gap."""
    if not meter_ids:
        return sum_days({}, meter_ids, days_between(first, last))
    rows = MeterDay.objects.filter(meter_id__in=meter_ids, day__gte=first, day__lte=last)
    return sum_days(by_meter(rows), meter_ids, days_between(first, last))


def by_meter(rows) -> dict[int, dict[date, tuple[float | None, str]]]:
    """MeterDay rows as {meter: {day: (value, status)}}: one query for many meters."""
    out: dict[int, dict[date, tuple[float | None, str]]] = defaultdict(dict)
    for meter, day, value, status in rows.values_list("meter", "day", "value", "status"):
        out[meter][day] = (value, status)
    return out


def sum_days(
    stored: dict[int, dict[date, tuple[float | None, str]]], meter_ids: list[int], days: list[date]
) -> list[tuple[date, float | None, str]]:
    """(day, value, status) of the sum of the meters; a day any meter lacks is a gap."""
    if not meter_ids:
        return [(d, None, consumption.GAP) for d in days]
    out = []
    for d in days:
        total, status = 0.0, consumption.MEASURED
        for m in meter_ids:
            value, s = stored.get(m, {}).get(d, (None, consumption.GAP))
            if value is None or s == consumption.GAP:
                total, status = None, consumption.GAP
                break
            total += value
            status = consumption.worst(status, s)
        out.append((d, total, status))
    return out


def degree_days_for(site, first: date, last: date) -> tuple[dict[date, float | None], float]:
    """HDD per local day from the site's outside temperature feed ({} without one)."""
    means, base = outside_means(site, first, last)
    return {d: degree_days.heating_degree_days(m, base) for d, m in means.items()}, base


def outside_means(site, first: date, last: date) -> tuple[dict[date, float | None], float]:
    """Mean outside temperature per local day ({} without a feed) and the site's HDD base."""
    settings_row = EnergySite.objects.filter(site=site).first()
    base = settings_row.hdd_base_c if settings_row else degree_days.DEFAULT_BASE_C
    if settings_row is None or settings_row.outside_temperature_feed_id is None:
        return {}, base
    return daily_feed_means(site, settings_row.outside_temperature_feed_id, first, last), base


def daily_feed_means(site, feed_id: int, first: date, last: date) -> dict[date, float | None]:
    """Mean of the hourly means of a feed per local day (None: under 75 % of hours known)."""
    tz = site_zone(site)
    bounds = consumption.local_bounds(first, last, tz)
    step = window_step(tz, bounds)
    t, v = read_windows(feed_id, bounds[0], bounds[-1], step, average=True, delta=False, tz=tz)
    if step != 3600:  # hourly means from quarter hours
        t, v = _to_hours(t, v)
    means = degree_days.daily_means(t, v, bounds)
    return dict(zip(days_between(first, last), means, strict=True))


def electricity_factors(site, first: date, last: date, constant: float) -> dict[date, float]:
    """Grid electricity's kg CO2e/kWh per day: the site's grid carbon feed (g/kWh, daily mean)
    where it has the day, else the period table (GridCarbonPeriod), else `constant` (the
    site's FuelRate or the UK default). docs/ENERGY.md "Grid carbon"."""
    out = dict.fromkeys(days_between(first, last), constant)
    for row in GridCarbonPeriod.objects.filter(site=site, start__lte=last, end__gte=first):
        for d in days_between(max(row.start, first), min(row.end, last)):
            out[d] = row.g_per_kwh / 1000.0
    feed_id = (
        EnergySite.objects.filter(site=site).values_list("grid_carbon_feed", flat=True).first()
    )
    if feed_id:
        for d, g in daily_feed_means(site, feed_id, first, last).items():
            if g is not None and 0 <= g <= 2000:  # a broken reading is not a factor
                out[d] = g / 1000.0
    return out


def daily_factors(site, fuel: str, first: date, last: date) -> dict[date, float]:
    """kg CO2e per unit of `fuel` per day: time-varying for electricity, constant otherwise."""
    factor = rates(site).get(fuel, (0.0, 0.0))[1]
    if fuel == benchmarks.ELECTRICITY:
        return electricity_factors(site, first, last, factor)
    return dict.fromkeys(days_between(first, last), factor)


def weighted_factors(
    meter_ids: list[int], use: list[tuple[date, float | None, str]], factors: dict[date, float]
) -> dict[date, float]:
    """Electricity's kg CO2e/kWh per day as the use's own: where every meter of the node has
    its day weighted hour by hour at the grid carbon feed (MeterDay.grid_kg_co2e, filled by
    energy/refresh.py), the day's kg / the day's kWh; else the day's factor as given (table,
    constant or the feed's daily mean). So figures, savings and CUSUM's CO2 weight each hour's
    use by that hour's intensity (docs/ENERGY.md "Grid carbon")."""
    if not meter_ids or not use:
        return factors
    first, last = use[0][0], use[-1][0]
    kg: dict[date, dict[int, float | None]] = defaultdict(dict)
    for meter, day, value in MeterDay.objects.filter(
        meter_id__in=meter_ids, day__gte=first, day__lte=last
    ).values_list("meter", "day", "grid_kg_co2e"):
        kg[day][meter] = value
    out = dict(factors)
    for d, value, _s in use:
        per_meter = kg.get(d, {})
        if not value or any(per_meter.get(m) is None for m in meter_ids):
            continue  # no use (a factor would multiply 0) or a meter not weighted that day
        out[d] = sum(per_meter[m] for m in meter_ids) / value
    return out


def _to_hours(t: list[int], v: list) -> tuple[list[int], list]:
    acc: dict[int, list[float]] = defaultdict(list)
    for ts, val in zip(t, v, strict=True):
        if val is not None:
            acc[ts // 3600 * 3600].append(val)
    hours = sorted(acc)
    return hours, [sum(acc[h]) / len(acc[h]) for h in hours]


def performance_line(
    tree: Tree, node: MeterNode, fuel: str, stored: dict | None = None, hdd: dict | None = None
) -> regression.Line | None:
    """Daily use regressed on daily HDD over the node's baseline period (`stored`, `hdd`:
    MeterDay rows by meter and HDD by day already read, so the league reads them once)."""
    if not (node.baseline_start and node.baseline_end):
        return None
    first, last = node.baseline_start, node.baseline_end
    if (last - first).days + 1 > MAX_RANGE_DAYS:
        return None
    ids = tree.meters_for(node.pk, fuel)
    if stored is None:
        use = daily_use(ids, first, last)
    else:
        use = sum_days(stored, ids, days_between(first, last))
    if hdd is None:
        hdd, _base = degree_days_for(tree.site, first, last)
    return regression.fit_line([hdd.get(d) for d, _v, _s in use], [v for _d, v, _s in use])


def baseline_for(tree: Tree, node: MeterNode, fuel: str, first: date) -> baseline.Baseline:
    """The baseline expected use of the node may come from when the range starts on `first`:
    its baseline period's line, else one fitted over the year before; used only if reliable
    (energy/baseline.py)."""
    start, end, fitted = baseline.window(node.baseline_start, node.baseline_end, first)
    line = None
    if (end - start).days + 1 <= MAX_RANGE_DAYS:
        use = daily_use(tree.meters_for(node.pk, fuel), start, end)
        hdd, _base = degree_days_for(tree.site, start, end)
        line = regression.fit_line([hdd.get(d) for d, _v, _s in use], [v for _d, v, _s in use])
    return baseline.judge(line, start, end, fitted)


def weekly_performance_line(tree: Tree, node: MeterNode, fuel: str) -> regression.Line | None:
    """Weekly use regressed on weekly HDD over the whole Monday-Sunday weeks of the baseline
    period (a week with a gap day or a day without degree days is left out; at least 3).

    kWh/week = base load per week + slope x HDD of the week. Weekly totals smooth out what
    daily data holds that is not weather (weekday against weekend occupancy), so the line's
    R² says how much of the use the weather explains once the week's rhythm is summed away;
    CIBSE TM41 §6 fits weekly or monthly data for this reason. The daily line stays the one
    expected use is taken from (it gives each day its own figure)."""
    if not (node.baseline_start and node.baseline_end):
        return None
    first = node.baseline_start + timedelta(days=(7 - node.baseline_start.weekday()) % 7)
    last = node.baseline_end - timedelta(days=(node.baseline_end.weekday() + 1) % 7)
    if (last - first).days + 1 < 7 or (last - first).days + 1 > MAX_RANGE_DAYS:
        return None
    use = daily_use(tree.meters_for(node.pk, fuel), first, last)
    hdd, _base = degree_days_for(tree.site, first, last)
    xs, ys = [], []
    for k in range(0, len(use), 7):
        week = use[k : k + 7]
        if any(v is None or hdd.get(d) is None for d, v, _s in week):
            continue
        xs.append(sum(hdd[d] for d, _v, _s in week))
        ys.append(sum(v for _d, v, _s in week))
    return regression.fit_line(xs, ys)


def line_json(line: regression.Line | None, per: str) -> dict | None:
    """A performance line as the API and page give it; `per` is "day" or "week"."""
    if line is None:
        return None
    count = "days" if per == "day" else "weeks"
    return {"slope_per_hdd": _r(line.slope), f"base_load_per_{per}": _r(line.base_load),
            "r2": _r(line.r2, 4), count: line.n}  # fmt: skip


def expected_daily(
    node: MeterNode,
    fuel: str,
    days: list[date],
    hdd: dict,
    line: regression.Line | None,
    rows: list | None = None,
) -> list[tuple[float | None, str | None]]:
    """(expected, source) per day: the imported model where it covers the day (its period's
    value spread evenly over its days), else the baseline performance line, else nothing.
    `rows`: the node's model rows already read (any fuel)."""
    first, last = days[0], days[-1]
    if rows is None:
        rows = ExpectedUse.objects.filter(node=node, fuel=fuel, start__lte=last, end__gte=first)
    model: dict[date, float] = {}
    for row in rows:
        if row.fuel != fuel or row.end < first or row.start > last:
            continue
        n = (row.end - row.start).days + 1
        for d in days_between(max(row.start, first), min(row.end, last)):
            model[d] = row.value / n
    out = []
    for d in days:
        if d in model:
            out.append((model[d], "model"))
        elif line is not None and hdd.get(d) is not None:
            out.append((line.expected(hdd[d]), "baseline"))
        else:
            out.append((None, None))
    return out


SYMBOLS = {"GBP": "£", "EUR": "€", "USD": "$"}


def currency_symbol(site) -> str:
    """The site's currency (EnergySite.currency, default GBP) as a symbol, else its code."""
    code = EnergySite.objects.filter(site=site).values_list("currency", flat=True).first()
    code = code or "GBP"
    return SYMBOLS.get(code, code)


def rates(site) -> dict[str, tuple[float, float]]:
    """(price, kg CO2e) per unit of each fuel at the site."""
    out = {f: (0.0, benchmarks.DEFAULT_FACTORS[f]) for f in benchmarks.FUELS}
    for r in FuelRate.objects.filter(site=site):
        out[r.fuel] = (r.price_per_unit, r.factor)
    return out


def negative_use_warning(fuels: list[str]) -> str | None:
    """The sentence staff see when use comes out below zero: a metering mistake to fix."""
    if not fuels:
        return None
    return (
        f"negative {', '.join(fuels)} use: a virtual meter subtracts more than it adds "
        "(check its terms); no DEC rating is given"
    )


def node_report(
    tree: Tree, node: MeterNode, fuel: str, first: date, last: date, period: str
) -> dict:
    """Actual against expected per period, the CUSUM, savings and the performance line."""
    days = days_between(first, last)
    meter_ids = tree.meters_for(node.pk, fuel)
    use = daily_use(meter_ids, first, last)
    hdd, base = degree_days_for(tree.site, first, last)
    verdict = baseline_for(tree, node, fuel, first) if meter_ids else None
    line = verdict.line if verdict else None
    expected = expected_daily(node, fuel, days, hdd, line)
    grouped = consumption.group_days(use, period)
    factors = daily_factors(tree.site, fuel, first, last)
    if fuel == benchmarks.ELECTRICITY:
        factors = weighted_factors(meter_ids, use, factors)
    exp_by: dict[date, list] = {}
    hdd_by: dict[date, list] = {}
    for d, (e, _src) in zip(days, expected, strict=True):
        key = consumption.period_key(d, period)
        g = exp_by.setdefault(key, [0.0, True])
        if e is None:
            g[1] = False
        else:
            g[0] += e
        h = hdd_by.setdefault(key, [0.0, True])
        if hdd.get(d) is None:
            h[1] = False
        else:
            h[0] += hdd[d]
    kg_by: dict[date, float] = defaultdict(float)
    for d, v, _s in use:
        if v is not None:
            kg_by[consumption.period_key(d, period)] += v * factors[d]
    expects = [exp_by[k][0] if exp_by[k][1] else None for k, *_ in grouped]
    # The CUSUM runs over days, not periods, so it moves by exactly the days the savings count
    # (both actual and expected known): a month only partly covered by the model still adds
    # its covered days, and the CUSUM at the end is minus the savings (an outside check found
    # the two disagreeing when the CUSUM was summed per month). A period's value is the running
    # sum at its last such day; None when it has none.
    day_cus = regression.cusum([a for _d, a, _s in use], [e for e, _src in expected])
    cus_by: dict[date, float] = {}
    for d, c in zip(days, day_cus, strict=True):
        if c is not None:
            cus_by[consumption.period_key(d, period)] = c
    cus = [cus_by.get(k) for k, *_ in grouped]
    price, _factor = rates(tree.site).get(fuel, (0.0, 0.0))
    saved = saved_kg = exp_compared = 0.0
    compared = 0
    for (d, a, _s), (e, _src) in zip(use, expected, strict=True):
        if a is not None and e is not None:
            saved += e - a
            saved_kg += (e - a) * factors[d]
            exp_compared += e
            compared += 1
    known = [(d, v) for d, v, _s in use if v is not None]
    # no day with data is "no data" (None), never a total of 0 (docs/ENERGY.md)
    total = sum(v for _d, v in known) if known else None
    total_kg = sum(v * factors[d] for d, v in known) if known else None
    rows = [
        {
            "start": key.isoformat(),
            "actual": _r(value),
            "status": status,
            "missing_days": missing,
            "expected": _r(exp),
            "cusum": _r(c),
            "cost": None if value is None else _r(value * price),
            "kg_co2e": None if value is None else _r(kg_by[key]),
            "hdd": _r(hdd_by[key][0]) if hdd_by[key][1] else None,
        }
        for (key, value, status, missing), exp, c in zip(grouped, expects, cus, strict=True)
    ]
    return {
        "node": node.pk,
        "name": node.name,
        "fuel": fuel,
        "unit": benchmarks.UNIT[fuel],
        "period": period,
        "first": first.isoformat(),
        "last": last.isoformat(),
        "rows": rows,
        "total": _r(total),
        "cost": None if total is None else _r(total * price),
        "kg_co2e": _r(total_kg),
        "expected_total": _r(sum(exp_days))
        if (exp_days := [e for e, _src in expected if e is not None])
        else None,
        # the days with both actual and expected, and the expected on them: the savings'
        # days, so expected_compared - actual on them = savings
        "compared_days": compared,
        "expected_compared": _r(exp_compared) if compared else None,
        "currency": currency_symbol(tree.site),
        # the CUSUM at the end of the range: the last period that has one
        "cusum": _r(next((c for c in reversed(cus) if c is not None), None)),
        "gap_days": sum(1 for _d, v, _s in use if v is None),
        "negative_days": (negative_days := sum(1 for _d, v, _s in use if v is not None and v < 0)),
        "warning": negative_use_warning([fuel]) if negative_days else None,
        "estimated_days": sum(1 for _d, _v, s in use if s == consumption.ESTIMATED),
        # no day with both actual and expected: nothing saved can be said (None), not 0
        "savings": {"kwh": _r(saved), "money": _r(saved * price), "kg_co2e": _r(saved_kg)}
        if compared
        else {"kwh": None, "money": None, "kg_co2e": None},
        "hdd_base_c": base,
        "performance_line_weekly": line_json(weekly_performance_line(tree, node, fuel), "week"),
        "performance_line": None
        if line is None
        else {
            "slope_per_hdd": _r(line.slope),
            "base_load_per_day": _r(line.base_load),
            "r2": _r(line.r2, 4),
            "days": line.n,
            "baseline_start": verdict.start.isoformat(),
            "baseline_end": verdict.end.isoformat(),
            # True: no baseline period was set, the line is fitted from the year before
            "fitted": verdict.fitted,
        },
        # meters the node's use is the sum of: 0 says "no meter here", not "N gap days"
        "meters": len(meter_ids),
        # where expected use comes from, or plainly why there is none (energy/baseline.py)
        "baseline_words": verdict.words(benchmarks.UNIT[fuel]) if verdict else None,
        "reliable_baseline": line is not None,
        "against_expected": wording.against_expected(
            _r(exp_compared - saved) if compared else None,
            _r(exp_compared) if compared else None,
            benchmarks.UNIT[fuel],
            price,
            currency_symbol(tree.site),
        ),  # fmt: skip
        "percent": wording.percent_over_under(
            exp_compared - saved if compared else None, exp_compared if compared else None
        ),
    }


def league(tree: Tree, first: date, last: date) -> list[dict]:
    """Buildings by kWh/m² over the range (energy fuels), DEC rating on the use annualised
    over the days with data, change against the expected use on the days that have both.

    Expected use is the same as the consumption API's (expected_daily: the imported model,
    else the baseline performance line), compared only on days with both actual and expected,
    as the savings are; `compared_days` says on how many. The database is asked a fixed
    number of times however many buildings there are, and each meter's days are one numpy
    array (NaN: a gap), so a year of 50 buildings is sums over arrays, not dict look-ups per
    meter and day (bench/energy.py; docs/BENCHMARKS.md "Energy")."""
    days = days_between(first, last)
    n = len(days)
    buildings = tree.buildings()
    fuel_ids = {
        (node.pk, fuel): ids
        for node in buildings
        for fuel in ENERGY_FUELS
        if (ids := tree.meters_for(node.pk, fuel))
    }
    separable = {node.pk: tree.separable_meters(node.pk) for node in buildings}
    all_ids = sorted(
        {i for ids in fuel_ids.values() for i in ids}
        | {m.pk for meters in separable.values() for m in meters}
    )
    arrays = day_arrays(all_ids, first, last)
    factors = rates(tree.site)
    models = _expected_rows(buildings, first, last)  # one query, not one per building
    windows = {
        node.pk: baseline.window(node.baseline_start, node.baseline_end, first)
        for node in buildings
    }
    verdicts = {
        key: baseline.judge(line, *windows[key[0]])
        for key, line in _baseline_lines(tree, buildings, windows).items()
    }
    lines = {key: v.line for key, v in verdicts.items() if v.line is not None}
    symbol = currency_symbol(tree.site)
    elec_factor = _array(
        electricity_factors(tree.site, first, last, factors[benchmarks.ELECTRICITY][1]), days
    )
    hdd_arr = np.full(n, np.nan)
    means: dict[date, float | None] = {}
    if lines or any(node.tm46_category for node in buildings):
        means, base = outside_means(tree.site, first, last)  # one read for both uses
        hdd_arr = _array(
            {d: degree_days.heating_degree_days(m, base) for d, m in means.items()}, days
        )
    dec_hdd = dec.degree_days_a_year(means)
    out = []
    for node in buildings:
        per_fuel: dict[str, float] = {}
        annual: dict[str, float] = {}
        gaps = 0
        all_known: np.ndarray | None = None
        actual_sum = exp_sum = money_diff = cost = kg = 0.0
        compared = np.zeros(n, dtype=bool)
        no_model: list[str] = []
        for fuel in ENERGY_FUELS:
            ids = fuel_ids.get((node.pk, fuel))
            if not ids:
                continue
            stack = np.vstack([arrays[i] for i in ids])
            gaps += int(np.isnan(stack).sum())
            use = stack.sum(axis=0)  # NaN on a day any meter of the fuel lacks: a gap
            # a meter's value on a day another meter of the fuel lacks still counts in the total
            total_fuel = float(np.nansum(stack))
            known = ~np.isnan(use)
            all_known = known if all_known is None else all_known & known
            price, factor = factors[fuel]
            if known.any():
                per_fuel[fuel] = total_fuel
                annual[fuel] = total_fuel * 365.0 / int(known.sum())
                cost += total_fuel * price
                day_use = np.nansum(stack, axis=0)
                kg += float(
                    (day_use * elec_factor).sum()
                    if fuel == benchmarks.ELECTRICITY
                    else total_fuel * factor
                )
            rows = models.get(node.pk, [])
            expected = expected_array(
                node, fuel, first, n, hdd_arr, lines.get((node.pk, fuel)), rows
            )
            both = known & ~np.isnan(expected)
            fuel_actual, fuel_exp = float(use[both].sum()), float(expected[both].sum())
            actual_sum += fuel_actual
            exp_sum += fuel_exp
            money_diff += (fuel_actual - fuel_exp) * price
            compared |= both
            verdict = verdicts.get((node.pk, fuel))
            if not any(r.fuel == fuel for r in rows) and (verdict is None or verdict.line is None):
                no_model.append(fuel)
        n_compared = int(compared.sum())
        total = sum(per_fuel.values()) if per_fuel else None
        year = sum(annual.values()) if annual else None
        elec = annual.get(benchmarks.ELECTRICITY, 0.0)
        fossil_factor = _weighted_fossil_factor(per_fuel, factors)
        rating = dec.DecResult(None, None, None)
        if year is not None:
            rating = dec.building_rating(
                node, elec, year - elec, dec.separable_a_year(separable[node.pk], arrays),
                dec_hdd, factors[benchmarks.ELECTRICITY][1], fossil_factor,
            )  # fmt: skip
        bench = benchmarks.TM46_TYPICAL.get(node.tm46_category)
        per_m2 = benchmarks.per_m2(total, node.floor_area_m2) if total is not None else None
        negative = sorted(f for f, v in per_fuel.items() if v < 0)
        out.append(
            {
                "node": node.pk,
                "name": node.name,
                "floor_area_m2": node.floor_area_m2,
                "kwh": _r(total),
                "kwh_per_m2": _r(per_m2),
                "kwh_per_m2_year": _r(benchmarks.per_m2(year, node.floor_area_m2))
                if year is not None
                else None,
                "days": n,
                # days every energy meter of the building has: the annualised figures are
                # scaled by 365 / the days each fuel has, not by the days of the range
                "days_with_data": int(all_known.sum()) if all_known is not None else 0,
                "tm46_category": node.tm46_category or None,
                "tm46_typical_electricity": bench.electricity if bench else None,
                "tm46_typical_fossil": bench.fossil if bench else None,
                "operational_rating": _r(rating.rating, 0),
                "dec_grade": benchmarks.dec_grade(rating.rating),
                # the benchmark the rating used and what adjusted it (docs/ENERGY.md)
                "dec": rating.details,
                "actual_compared_kwh": _r(actual_sum) if n_compared else None,
                "expected_kwh": _r(exp_sum) if n_compared else None,
                "change_pct": _r(100.0 * (actual_sum - exp_sum) / exp_sum, 1)
                if n_compared and exp_sum
                else None,
                "compared_days": n_compared,
                # plain words (energy/wording.py): over/under, never a sign to decode
                "against_expected": wording.difference(
                    actual_sum - exp_sum, money_diff, "kWh", symbol
                )
                if n_compared
                else None,
                "percent": wording.percent_over_under(actual_sum, exp_sum) if n_compared else None,
                # kWh of each energy fuel; cost and emissions of them all
                "fuels": {f: _r(v) for f, v in per_fuel.items()},
                "cost": _r(cost, 2) if per_fuel else None,
                "currency": symbol,
                "kg_co2e": _r(kg) if per_fuel else None,
                # where expected use comes from: "model", "baseline" (set or fitted) or, when
                # neither covers a fuel, the plain reason none fits
                "expected_from": _expected_from(node, fuel_ids, models, verdicts),
                "no_model": [
                    {
                        "fuel": f,
                        "reason": verdicts[(node.pk, f)].reason
                        if (node.pk, f) in verdicts
                        else "no data to fit a baseline to",
                    }
                    for f in no_model
                ],  # fmt: skip
                "gap_meter_days": gaps,
                "warning": negative_use_warning(negative) or rating.warning,
            }
        )
    out.sort(key=lambda r: (r["kwh_per_m2"] is None, -(r["kwh_per_m2"] or 0)))
    return out


# Meters per plain SQL query: under SQLite's oldest bound on parameters (999).
_IDS_PER_QUERY = 500


def day_arrays(meter_ids: list[int], first: date, last: date) -> dict[int, np.ndarray]:
    """Each meter's values first..last as an array by day (NaN: a gap or no row).

    One plain SQL query per 500 meters: the ORM's per-row date conversion was a third of the
    league's time. A row's value is null exactly when the day is a gap (MeterDay), so only
    the non-null values are read. The day is read as ISO text on every backend."""
    n = (last - first).days + 1
    out = {m: np.full(n, np.nan) for m in meter_ids}
    if not meter_ids:
        return out
    index: dict[str, int] = {}
    for i in range(n):
        d = first + timedelta(days=i)
        index[d.isoformat()] = i
    table = connection.ops.quote_name(MeterDay._meta.db_table)
    with connection.cursor() as cursor:
        for k in range(0, len(meter_ids), _IDS_PER_QUERY):
            chunk = list(meter_ids[k : k + _IDS_PER_QUERY])
            marks = ", ".join(["%s"] * len(chunk))
            cursor.execute(
                # the day as text: no per-row date conversion (SQLite's declared-type converter)
                f"SELECT meter_id, CAST(day AS TEXT), value FROM {table} "
                f"WHERE meter_id IN ({marks}) "
                "AND day >= %s AND day <= %s AND value IS NOT NULL",
                [*chunk, first, last],
            )
            for meter, day, value in cursor.fetchall():
                i = index.get(day)
                if i is not None:
                    out[meter][i] = value
    return out


def expected_array(
    node: MeterNode,
    fuel: str,
    first: date,
    n: int,
    hdd: np.ndarray,
    line: regression.Line | None,
    rows: list,
) -> np.ndarray:
    """expected_daily as an array over n days from `first` (NaN: no expected use): the model
    where it covers the day, else the baseline line at the day's HDD."""
    if line is not None:
        out = line.base_load + line.slope * hdd  # NaN where the day has no degree days
    else:
        out = np.full(n, np.nan)
    last = first + timedelta(days=n - 1)
    for row in rows:
        if row.fuel != fuel or row.end < first or row.start > last:
            continue
        per_day = row.value / ((row.end - row.start).days + 1)
        lo = max(0, (row.start - first).days)
        hi = min(n - 1, (row.end - first).days)
        out[lo : hi + 1] = per_day
    return out


def _array(values: dict, days: list[date]) -> np.ndarray:
    return np.array([np.nan if values.get(d) is None else values[d] for d in days], dtype=float)


def _expected_from(node: MeterNode, fuel_ids: dict, models: dict, verdicts: dict) -> str | None:
    """'model for electricity', 'fitted baseline for gas' (several joined by ' + '), or None:
    nothing. The fuel is named: a building's figure may come from one fuel's line while another
    fuel has no reliable model (an outside tester read the two as contradicting)."""
    out = []
    for fuel in ENERGY_FUELS:
        if (node.pk, fuel) not in fuel_ids:
            continue
        if any(r.fuel == fuel for r in models.get(node.pk, [])):
            out.append(f"model for {fuel}")
        elif (v := verdicts.get((node.pk, fuel))) is not None and v.line is not None:
            out.append(f"{'fitted baseline' if v.fitted else 'baseline'} for {fuel}")
    return " + ".join(out) or None


def _baseline_lines(
    tree: Tree, nodes: list[MeterNode], windows: dict[int, tuple[date, date, bool]]
) -> dict[tuple[int, str], regression.Line | None]:
    """Lines of the nodes per energy fuel over their baseline windows (set or the year before:
    energy/baseline.py window), the days and HDD read once; None where too few days fit."""
    nodes = [n for n in nodes if (windows[n.pk][1] - windows[n.pk][0]).days + 1 <= MAX_RANGE_DAYS]
    if not nodes:
        return {}
    lo = min(windows[n.pk][0] for n in nodes)
    hi = max(windows[n.pk][1] for n in nodes)
    ids = sorted({i for n in nodes for f in ENERGY_FUELS for i in tree.meters_for(n.pk, f)})
    arrays = day_arrays(ids, lo, hi)
    hdd_all = None  # read per node when the baselines together span too long
    if (hi - lo).days + 1 <= MAX_RANGE_DAYS:
        hdd, _base = degree_days_for(tree.site, lo, hi)
        hdd_all = _array(hdd, days_between(lo, hi))
    out = {}
    for n in nodes:
        start, end, _fitted = windows[n.pk]
        a, b = (start - lo).days, (end - lo).days + 1
        if hdd_all is not None:
            x = hdd_all[a:b]
        else:
            hdd, _base = degree_days_for(tree.site, start, end)
            x = _array(hdd, days_between(start, end))
        for fuel in ENERGY_FUELS:
            meter_ids = tree.meters_for(n.pk, fuel)
            if not meter_ids:
                continue
            y = np.vstack([arrays[i][a:b] for i in meter_ids]).sum(axis=0)
            # days with NaN (gap, no HDD) are left out; None: under 3 days (judged later)
            out[(n.pk, fuel)] = regression.fit_line(x, y)
    return out


def _weighted_fossil_factor(per_fuel: dict, factors: dict) -> float:
    """One factor for the fossil-thermal use: the use-weighted mean (gas when there is none)."""
    fossil = {f: v for f, v in per_fuel.items() if f != benchmarks.ELECTRICITY and v > 0}
    total = sum(fossil.values())
    if not total:
        return factors[benchmarks.GAS][1]
    return sum(factors[f][1] * v for f, v in fossil.items()) / total


def _expected_rows(nodes: list[MeterNode], first: date, last: date) -> dict[int, list]:
    """The model rows (energy fuels) of the nodes that overlap first..last, by node."""
    rows: dict[int, list[ExpectedUse]] = defaultdict(list)
    for row in ExpectedUse.objects.filter(
        node__in=[n.pk for n in nodes], fuel__in=ENERGY_FUELS, start__lte=last, end__gte=first
    ):
        rows[row.node_id].append(row)
    return rows


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)
