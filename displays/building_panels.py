"""Kiosk panels of a building's energy, from the energy app's public figures (energy.public).

displays sits above energy (it may import energy; energy never imports displays). A panel
names its building in options.building; what reaches the screen is energy.public's totals
only. Figures are cached for a minute (today) or ten (savings) so a wall of screens polling
every 30 s computes them once, not once per screen per poll.
"""

from __future__ import annotations

from django.core.cache import cache

from displays.models import Panel
from energy import public
from energy.models import MeterNode

TODAY_CACHE_S = 60
SAVED_CACHE_S = 600


def _node(panel: Panel) -> MeterNode | None:
    return (
        MeterNode.objects.select_related("site")
        .filter(pk=panel.options.get("building"), kind=MeterNode.Kind.BUILDING)
        .first()
    )


def building_today(panel: Panel, now: int) -> dict:
    node = _node(panel)
    if node is None:
        return {"error": "The building of this panel is gone"}
    key = f"kiosk-building-today:{node.pk}:{now // TODAY_CACHE_S}"
    figures = cache.get(key)
    if figures is None:
        figures = public.today_against_model(node, now)
        cache.set(key, figures, TODAY_CACHE_S)
    return {"building": node.name, **figures}


def building_saved(panel: Panel, now: int) -> dict:
    node = _node(panel)
    if node is None:
        return {"error": "The building of this panel is gone"}
    period = panel.options.get("period", "30d")
    key = f"kiosk-building-saved:{node.pk}:{period}:{now // SAVED_CACHE_S}"
    figures = cache.get(key)
    if figures is None:
        figures = public.co2_saved(node, period, now)
        cache.set(key, figures, SAVED_CACHE_S)
    return {"building": node.name, **figures}


KINDS = {Panel.Kind.BUILDING_TODAY: building_today, Panel.Kind.BUILDING_SAVED: building_saved}
