"""The figures the energy page and API show, from MeterDay, ExpectedUse and the weather feed.

One site's tree is loaded once (Tree) so a page asks the database a handful of times, not once
per node. Methods are in docs/ENERGY.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db.models import Count, Q, Sum

from energy import benchmarks, consumption, degree_days, regression
from energy.models import EnergySite, ExpectedUse, FuelRate, Meter, MeterDay, MeterNode
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


def daily_use(
    meter_ids: list[int], first: date, last: date
) -> list[tuple[date, float | None, str]]:
    """The sum of the meters per day; a day any meter lacks is a gap."""
    days = days_between(first, last)
    if not meter_ids:
        return [(d, None, consumption.GAP) for d in days]
    total: dict[date, list] = {}
    rows = MeterDay.objects.filter(meter_id__in=meter_ids, day__gte=first, day__lte=last)
    for day, value, status in rows.values_list("day", "value", "status"):
        t = total.setdefault(day, [0.0, consumption.MEASURED, 0])
        t[2] += 1
        if value is None:
            t[1] = consumption.GAP
        else:
            t[0] += value
            t[1] = consumption.worst(t[1], status)
    out = []
    need = len(meter_ids)
    for d in days:
        t = total.get(d)
        if t is None or t[2] < need or t[1] == consumption.GAP:
            out.append((d, None, consumption.GAP))
        else:
            out.append((d, t[0], t[1]))
    return out


def degree_days_for(site, first: date, last: date) -> tuple[dict[date, float | None], float]:
    """HDD per local day from the site's outside temperature feed ({} without one)."""
    settings_row = EnergySite.objects.filter(site=site).first()
    base = settings_row.hdd_base_c if settings_row else degree_days.DEFAULT_BASE_C
    if settings_row is None or settings_row.outside_temperature_feed_id is None:
        return {}, base
    tz = site_zone(site)
    bounds = consumption.local_bounds(first, last, tz)
    step = window_step(tz, bounds)
    t, v = read_windows(
        settings_row.outside_temperature_feed_id, bounds[0], bounds[-1], step,
        average=True, delta=False, tz=tz,
    )  # fmt: skip
    if step != 3600:  # hourly means from quarter hours
        t, v = _to_hours(t, v)
    means = degree_days.daily_means(t, v, bounds)
    days = days_between(first, last)
    return {
        d: degree_days.heating_degree_days(m, base) for d, m in zip(days, means, strict=True)
    }, base


def _to_hours(t: list[int], v: list) -> tuple[list[int], list]:
    acc: dict[int, list[float]] = defaultdict(list)
    for ts, val in zip(t, v, strict=True):
        if val is not None:
            acc[ts // 3600 * 3600].append(val)
    hours = sorted(acc)
    return hours, [sum(acc[h]) / len(acc[h]) for h in hours]


def performance_line(tree: Tree, node: MeterNode, fuel: str) -> regression.Line | None:
    """Daily use regressed on daily HDD over the node's baseline period."""
    if not (node.baseline_start and node.baseline_end):
        return None
    first, last = node.baseline_start, node.baseline_end
    if (last - first).days + 1 > MAX_RANGE_DAYS:
        return None
    use = daily_use(tree.meters_for(node.pk, fuel), first, last)
    hdd, _base = degree_days_for(tree.site, first, last)
    return regression.fit_line([hdd.get(d) for d, _v, _s in use], [v for _d, v, _s in use])


def expected_daily(
    node: MeterNode, fuel: str, days: list[date], hdd: dict, line: regression.Line | None
) -> list[tuple[float | None, str | None]]:
    """(expected, source) per day: the imported model where it covers the day (its period's
    value spread evenly over its days), else the baseline performance line, else nothing."""
    first, last = days[0], days[-1]
    model: dict[date, float] = {}
    for row in ExpectedUse.objects.filter(node=node, fuel=fuel, start__lte=last, end__gte=first):
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


def rates(site) -> dict[str, tuple[float, float]]:
    """(price, kg CO2e) per unit of each fuel at the site."""
    out = {f: (0.0, benchmarks.DEFAULT_FACTORS[f]) for f in benchmarks.FUELS}
    for r in FuelRate.objects.filter(site=site):
        out[r.fuel] = (r.price_per_unit, r.factor)
    return out


def node_report(
    tree: Tree, node: MeterNode, fuel: str, first: date, last: date, period: str
) -> dict:
    """Actual against expected per period, the CUSUM, savings and the performance line."""
    days = days_between(first, last)
    use = daily_use(tree.meters_for(node.pk, fuel), first, last)
    hdd, base = degree_days_for(tree.site, first, last)
    line = performance_line(tree, node, fuel)
    expected = expected_daily(node, fuel, days, hdd, line)
    grouped = consumption.group_days(use, period)
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
    actuals = [v for _k, v, _s, _m in grouped]
    expects = [exp_by[k][0] if exp_by[k][1] else None for k, *_ in grouped]
    cus = regression.cusum(actuals, expects)
    price, factor = rates(tree.site).get(fuel, (0.0, 0.0))
    saved = sum(
        (e - a) for (_d, a, _s), (e, _src) in zip(use, expected, strict=True)
        if a is not None and e is not None
    )  # fmt: skip
    rows = [
        {
            "start": key.isoformat(),
            "actual": _r(value),
            "status": status,
            "missing_days": missing,
            "expected": _r(exp),
            "cusum": _r(c),
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
        "total": _r(sum(v for _d, v, _s in use if v is not None)),
        "expected_total": _r(sum(known))
        if (known := [e for e, _src in expected if e is not None])
        else None,
        # the CUSUM at the end of the range: the last period that has one
        "cusum": _r(next((c for c in reversed(cus) if c is not None), None)),
        "gap_days": sum(1 for _d, v, _s in use if v is None),
        "estimated_days": sum(1 for _d, _v, s in use if s == consumption.ESTIMATED),
        "savings": {"kwh": _r(saved), "money": _r(saved * price), "kg_co2e": _r(saved * factor)},
        "hdd_base_c": base,
        "performance_line": None
        if line is None
        else {
            "slope_per_hdd": _r(line.slope),
            "base_load_per_day": _r(line.base_load),
            "r2": _r(line.r2, 4),
            "days": line.n,
            "baseline_start": node.baseline_start.isoformat(),
            "baseline_end": node.baseline_end.isoformat(),
        },
    }


def league(tree: Tree, first: date, last: date) -> list[dict]:
    """Buildings by kWh/m² over the range (energy fuels), DEC rating on the annualised use,
    change against expected. One aggregate query for all meters."""
    ndays = (last - first).days + 1
    all_ids = [m.pk for ms in tree.meters.values() for m in ms]
    sums = {
        r["meter"]: r
        for r in MeterDay.objects.filter(meter_id__in=all_ids, day__gte=first, day__lte=last)
        .values("meter")
        .annotate(total=Sum("value"), gaps=Count("pk", filter=Q(status=consumption.GAP)))
    }
    factors = rates(tree.site)
    buildings = tree.buildings()
    models = _expected_rows(buildings, first, last)  # one query, not one per building
    out = []
    for node in buildings:
        per_fuel, gaps = {}, 0
        for fuel in ENERGY_FUELS:
            ids = tree.meters_for(node.pk, fuel)
            if ids:
                per_fuel[fuel] = sum((sums.get(i, {}).get("total") or 0.0) for i in ids)
                gaps += sum((sums[i]["gaps"] if i in sums else ndays) for i in ids)
        total = sum(per_fuel.values())
        elec = per_fuel.get(benchmarks.ELECTRICITY, 0.0)
        fossil = total - elec
        fossil_factor = _weighted_fossil_factor(per_fuel, factors)
        annual = 365.0 / ndays
        rating = None
        if node.floor_area_m2 and node.tm46_category:
            rating = benchmarks.operational_rating(
                elec * annual, fossil * annual, node.floor_area_m2, node.tm46_category,
                factors[benchmarks.ELECTRICITY][1], fossil_factor,
            )  # fmt: skip
        exp_total = _expected_total(models.get(node.pk, ()), first, last)
        bench = benchmarks.TM46_TYPICAL.get(node.tm46_category)
        out.append(
            {
                "node": node.pk,
                "name": node.name,
                "floor_area_m2": node.floor_area_m2,
                "kwh": _r(total),
                "kwh_per_m2": _r(benchmarks.per_m2(total, node.floor_area_m2)),
                "kwh_per_m2_year": _r(benchmarks.per_m2(total * annual, node.floor_area_m2)),
                "tm46_category": node.tm46_category or None,
                "tm46_typical_electricity": bench.electricity if bench else None,
                "tm46_typical_fossil": bench.fossil if bench else None,
                "operational_rating": _r(rating, 0),
                "dec_grade": benchmarks.dec_grade(rating),
                "expected_kwh": _r(exp_total),
                "change_pct": _r(100.0 * (total - exp_total) / exp_total, 1) if exp_total else None,
                "gap_meter_days": gaps,
            }
        )
    out.sort(key=lambda r: (r["kwh_per_m2"] is None, -(r["kwh_per_m2"] or 0)))
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


def _expected_total(rows, first: date, last: date) -> float | None:
    """The imported model's expected energy for the range (periods pro rata), if it has any."""
    total, found = 0.0, False
    for row in rows:
        n = (row.end - row.start).days + 1
        overlap = (min(row.end, last) - max(row.start, first)).days + 1
        total += row.value * overlap / n
        found = True
    return total if found else None


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)
