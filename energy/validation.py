"""Checks on virtual meters that span rows: no cycles, one quantity (docs/ENERGY.md).

Raised as django ValidationError({"terms": ...}) naming the meters, so the admin shows it on
the form and the API answers 400 with the same words.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError

from energy import benchmarks


def _path_back(start_id: int, target_id: int, graph: dict[int, list[int]]) -> list[int] | None:
    """Meter ids from start to target following virtual terms, or None if target is unreachable."""
    stack = [(start_id, [start_id])]
    seen = set()
    while stack:
        node, path = stack.pop()
        if node == target_id:
            return path
        if node in seen:
            continue
        seen.add(node)
        for nxt in graph.get(node, ()):
            stack.append((nxt, path + [nxt]))
    return None


def check_terms(meter, terms: Iterable[tuple[object, int]]) -> None:
    """`meter` (saved or not) would be the signed sum of `terms`: refuse what cannot be."""
    from energy.models import MAX_TERMS, Meter, VirtualTerm

    terms = list(terms)
    if meter.source != Meter.Source.VIRTUAL:
        if terms:
            raise ValidationError({"terms": f"'{meter}' is not virtual: it reads its feed"})
        return
    if not terms:
        raise ValidationError({"terms": f"virtual meter '{meter}' needs at least one term"})
    if len(terms) > MAX_TERMS:
        raise ValidationError({"terms": f"at most {MAX_TERMS} terms per virtual meter"})
    quantity = benchmarks.QUANTITY[meter.fuel]
    ids = set()
    for source, sign in terms:
        if sign not in (1, -1):
            raise ValidationError({"terms": f"sign of '{source}' must be 1 or -1"})
        if meter.pk is not None and source.pk == meter.pk:
            raise ValidationError({"terms": f"virtual meter '{meter}' cannot contain itself"})
        if source.pk in ids:
            raise ValidationError({"terms": f"'{source}' appears twice in '{meter}'"})
        ids.add(source.pk)
        if source.node.site_id != meter.node.site_id:
            raise ValidationError({"terms": f"'{source}' is metered at another site"})
        if benchmarks.QUANTITY[source.fuel] != quantity:
            raise ValidationError(
                {
                    "terms": f"units do not agree: '{source}' measures {source.fuel} "
                    f"({benchmarks.UNIT[source.fuel]}), '{meter}' measures {meter.fuel} "
                    f"({benchmarks.UNIT[meter.fuel]})"
                }
            )
    if meter.pk is None:
        return  # nothing can refer to a meter not yet saved: no cycle possible
    graph: dict[int, list[int]] = {}
    for owner, src in VirtualTerm.objects.exclude(meter=meter).values_list("meter", "source"):
        graph.setdefault(owner, []).append(src)
    names = dict(Meter.objects.filter(node__site_id=meter.node.site_id).values_list("pk", "name"))
    for source, _sign in terms:
        path = _path_back(source.pk, meter.pk, graph)
        if path is not None:
            chain = " -> ".join(f"'{names.get(i, i)}'" for i in [meter.pk, *path])
            raise ValidationError({"terms": f"cycle: {chain}"})


def check_fuel_change(meter) -> None:
    """A meter used in virtual meters may not change to a quantity they cannot add."""
    if meter.pk is None:
        return
    quantity = benchmarks.QUANTITY[meter.fuel]
    for term in meter.used_in.select_related("meter"):
        owner = term.meter
        if benchmarks.QUANTITY[owner.fuel] != quantity:
            raise ValidationError(
                {
                    "fuel": f"units do not agree: virtual meter '{owner}' ({owner.fuel}) "
                    f"adds '{meter}', which would measure {meter.fuel}"
                }
            )


def check_expected_overlap(row) -> None:
    """Model periods of one building and fuel may not overlap (each day expected once)."""
    from energy.models import ExpectedUse

    if not (row.node_id and row.start and row.end):
        return
    clash = (
        ExpectedUse.objects.filter(node_id=row.node_id, fuel=row.fuel)
        .exclude(pk=row.pk)
        .filter(start__lte=row.end, end__gte=row.start)
        .first()
    )
    if clash is not None:
        raise ValidationError(
            {"start": f"overlaps the model period {clash.start}..{clash.end} of '{row.node}'"}
        )
