"""The staff energy page: tree, period, actual against expected, CUSUM, league table."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.exceptions import ValidationError

from bms.permissions import has_staff_role
from energy import benchmarks, consumption, report
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


@login_required
def energy_page(request: HttpRequest) -> HttpResponse:
    if not has_staff_role(request.user):
        return render(request, "bms/forbidden.html", status=403)
    params = request.GET
    try:
        first, last = parse_range(params, default_days=30)
        period = parse_choice(params, "period", consumption.PERIODS, "day")
    except ValidationError as exc:
        return JsonResponse({"success": False, "error": str(exc.detail)}, status=400)
    sites = list(Site.objects.all())
    site = next((s for s in sites if str(s.pk) == params.get("site")), sites[0] if sites else None)
    context = {"nav": "energy", "sites": sites, "site": site, "first": first, "last": last,
               "period": period, "periods": consumption.PERIODS}  # fmt: skip
    if site is not None:
        tree = report.Tree.load(site)
        nodes = _flatten(tree)
        node = None
        raw = params.get("node", "")
        if raw.isdigit() and int(raw) in tree.nodes:
            node = tree.nodes[int(raw)]
        elif nodes:
            node = nodes[0]["node"]
        context.update(tree=nodes, node=node, league=report.league(tree, first, last))
        if node is not None:
            fuels = tree.fuels(node.pk) or [benchmarks.ELECTRICITY]
            fuel = params.get("fuel") if params.get("fuel") in fuels else fuels[0]
            context.update(
                fuels=fuels, fuel=fuel,
                figures=report.node_report(tree, node, fuel, first, last, period),
            )  # fmt: skip
    return render(request, "energy/energy.html", context)


__all__ = ["energy_page", "MeterNode"]
