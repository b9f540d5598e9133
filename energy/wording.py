"""Figures against expected in the words a manager reads without a glossary (issue #28).

"Saved −288.1 kWh · £−20.17" made the reader work out the sign; "Used 288 kWh (£20) more
than expected" does not. Pure functions: the page, the league and their tests share them.
"""

from __future__ import annotations

# Below this much (in the unit shown) a difference is "as expected": rounding, not use.
AS_EXPECTED = 0.05


def amount(value: float, unit: str) -> str:
    """288 kWh, 4.5 kWh: whole units once the figure is 10 or more (as a bill shows them)."""
    value = abs(value)
    return f"{value:,.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"


def money(value: float, symbol: str) -> str:
    """£20, £4.35: whole pounds from 10 up, pence below."""
    value = abs(value)
    return f"{symbol}{value:,.0f}" if value >= 10 else f"{symbol}{value:.2f}"


def against_expected(
    actual: float | None, expected: float | None, unit: str, price: float | None, symbol: str
) -> str | None:
    """'Used 288 kWh (£20) more than expected' / '... less than expected' / 'Used as
    expected'; None when there is nothing to compare. `price`: money per unit (None: no £)."""
    if actual is None or expected is None:
        return None
    diff = actual - expected
    return difference(diff, diff * price if price else None, unit, symbol)


def difference(diff: float, diff_money: float | None, unit: str, symbol: str) -> str:
    """The words of actual − expected = `diff` (and what it cost, when known)."""
    if abs(diff) < AS_EXPECTED:
        return "Used as expected"
    cost = f" ({money(diff_money, symbol)})" if diff_money else ""
    more = "more" if diff > 0 else "less"
    return f"Used {amount(diff, unit)}{cost} {more} than expected"


def percent_over_under(actual: float | None, expected: float | None) -> str | None:
    """'12.3 % over expected' / '4.0 % under expected' / 'as expected'; None: no expected."""
    if actual is None or not expected:
        return None
    pct = 100.0 * (actual - expected) / expected
    if abs(pct) < 0.05:
        return "as expected"
    return f"{abs(pct):.1f} % {'over' if pct > 0 else 'under'} expected"
