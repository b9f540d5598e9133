"""Names people and devices chose, shown on one line: `{% load words %}{{ feed|one_line }}`.

A name with a line break, a control character or a bidi override (U+202E prints what follows
backwards) is shown as core.words.one_line makes it, so it cannot break or reverse the line it
is shown in."""

from __future__ import annotations

from django import template

from core.words import one_line as _one_line

register = template.Library()


@register.filter
def one_line(value: object) -> str:
    return _one_line(str(value))
