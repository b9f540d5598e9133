"""Template filters of the energy page."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict, key: str):
    """mapping[key], or None: a league row's kWh of one fuel (absent: no meter of it)."""
    return mapping.get(key) if isinstance(mapping, dict) else None
