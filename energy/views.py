"""The staff energy page: tree, period, actual against expected, CUSUM, league table."""

from __future__ import annotations

from datetime import date, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST
from rest_framework.exceptions import ValidationError

from core.pages import staff_page
from core.permissions import is_engineer
from energy import benchmarks, consumption, model_csv, refresh, report
from energy.api import parse_choice, parse_range
from energy.models import MeterNode
from sensors.models import Site


def _flatten(tree: report.Tree, parent: int | None = None, depth: int = 0) -> list[dict]:
    out = []
    for pk in tree.children.get(parent, ()):
        node = tree.nodes[pk]
        out.append({"node": node, "depth": depth, "indent": depth * 1.2})
        out.extend(_flatten(tree, pk, depth + 1))
    return out


@staff_page
def energy_page(request: HttpRequest) -> HttpResponse:
    params = request.GET
    error, status = None, 200
    try:
        first, last = parse_range(params, default_days=30)
        period = parse_choice(params, "period", consumption.PERIODS, "day")
    except ValidationError as exc:
        # the page, not a JSON body of Python reprs: say what was wrong and show the default
        error, status = _readable(exc), 400
        first, last = parse_range({}, default_days=30)
        period = "day"
    errors = [error] if error else []
    sites = list(Site.objects.all())
    site = next((s for s in sites if str(s.pk) == params.get("site")), None)
    if site is None and params.get("site"):
        # a site, node or fuel asked for and not there is said, never swapped for another
        errors.append(
            f"site: no site {params['site'][:40]!r}; showing {sites[0] if sites else 'none'}"
        )
    site = site or (sites[0] if sites else None)
    context = {"nav": "energy", "sites": sites, "site": site, "first": first, "last": last,
               "period": period, "periods": consumption.PERIODS, "error": error,
               "range_error": bool(error),
               # engineers import the site energy model here (energy_model_upload)
               "can_import": is_engineer(request.user),
               # the report of the month the range ends in
               "report_month": f"{last:%Y-%m}", "report_month_name": f"{last:%B %Y}"}  # fmt: skip
    if site is not None:
        tree = report.Tree.load(site)
        nodes = _flatten(tree)
        node = None
        raw = params.get("node", "")
        if raw.isascii() and raw.isdigit() and int(raw) in tree.nodes:
            node = tree.nodes[int(raw)]
        elif nodes:
            node = nodes[0]["node"]
        if raw and (node is None or str(node.pk) != raw):
            errors.append(f"node: no node {raw[:40]!r} at site '{site}'"
                          + (f"; showing '{node}'" if node is not None else ""))  # fmt: skip
        league = report.league(tree, first, last)
        context.update(tree=nodes, node=node, league=league,
                       league_fuels=[f for f in report.ENERGY_FUELS
                                     if any(f in b["fuels"] for b in league)],
                       presets=_presets(refresh.local_today(refresh.site_zone(site))))  # fmt: skip
        if node is not None:
            fuels = tree.fuels(node.pk)
            # a fuel asked for is shown even where the node has no meter of it (as "no data"),
            # not silently swapped for another
            asked = params.get("fuel")
            fuel = asked if asked in benchmarks.FUELS else (fuels or [benchmarks.ELECTRICITY])[0]
            if asked and asked not in benchmarks.FUELS:
                errors.append(f"fuel: {asked[:40]!r}: use one of {', '.join(benchmarks.FUELS)}; "
                              f"showing {fuel}")  # fmt: skip
            if fuel not in fuels:
                fuels = [*fuels, fuel]
            context.update(
                fuels=fuels, fuel=fuel,
                figures=report.node_report(tree, node, fuel, first, last, period),
            )  # fmt: skip
    if errors:
        context["error"], status = "; ".join(errors), 400
    return render(request, "energy/energy.html", context, status=status)


@staff_page
@require_POST
def energy_model_upload(request: HttpRequest) -> HttpResponse:
    """An engineer imports the site energy model (CSV) from the staff page: all rows or none;
    a bad row is named on the page (row, field), as the API's 400 names it."""
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may import the site energy model.")
    raw_site = request.POST.get("site", "")
    site = (
        Site.objects.filter(pk=int(raw_site)).first()
        if raw_site.isascii() and raw_site.isdigit()
        else None
    )
    back = reverse("staff-energy")
    if site:
        # back to the building, fuel and range shown; each value bounded, the page itself
        # checks them (a bad one is said there, never a 500 here)
        keep = {"site": site.pk} | {
            k: request.POST[k][:40]
            for k in ("node", "fuel", "start", "end", "period")
            if request.POST.get(k)
        }
        back += "?" + urlencode(keep)
    upload = request.FILES.get("file")
    if site is None:
        messages.error(request, "Model not imported: site: choose a site.")
    elif upload is None:
        messages.error(request, "Model not imported: file: choose a CSV file.")
    elif upload.size > model_csv.MAX_BYTES:
        messages.error(
            request, f"Model not imported: file: larger than {model_csv.MAX_BYTES} bytes."
        )
    else:
        try:
            stored = model_csv.store(model_csv.parse(upload.read(model_csv.MAX_BYTES + 1), site))
        except model_csv.BadModelCsv as exc:
            messages.error(request, f"Model not imported (no row was stored): {exc}.")
        else:
            messages.success(
                request, f"Site energy model: {stored} row{'s' if stored != 1 else ''} imported "
                f"from {upload.name}."
            )  # fmt: skip
    return redirect(back)


def _presets(today: date) -> list[tuple[str, date, date]]:
    """Ranges a manager asks about by name ("last week" is the last whole Monday-Sunday
    week), so nobody counts days back on a calendar."""
    monday = today - timedelta(days=today.weekday())
    month_start = today.replace(day=1)
    last_month_end = month_start - timedelta(days=1)
    return [
        ("Last 7 days", today - timedelta(days=6), today),
        ("Last week", monday - timedelta(days=7), monday - timedelta(days=1)),
        ("This month", month_start, today),
        ("Last month", last_month_end.replace(day=1), last_month_end),
        ("Past year", today - timedelta(days=364), today),
    ]


def _readable(exc: ValidationError) -> str:
    """'end: must not be before start' from DRF's {field: [ErrorDetail]}."""
    detail = exc.detail
    if isinstance(detail, dict):
        return "; ".join(
            f"{field}: {' '.join(str(m) for m in (msgs if isinstance(msgs, list) else [msgs]))}"
            for field, msgs in detail.items()
        )
    return " ".join(str(m) for m in detail) if isinstance(detail, list) else str(detail)


__all__ = ["energy_page", "energy_model_upload", "MeterNode"]
