"""`{{ name|strategy_words }}`: a control strategy's name in plain words (control/words.py)."""

from django import template

from control.words import strategy_words as _words

register = template.Library()


@register.filter
def strategy_words(name: str | None) -> str:
    return _words(name)
