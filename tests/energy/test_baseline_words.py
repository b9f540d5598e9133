"""The baseline verdict and the over/under words (energy/baseline.py, energy/wording.py):
a line the weather explains poorly is not used; signs become words."""

from __future__ import annotations

from datetime import date

import pytest

from energy import baseline, wording
from energy.regression import Line

START, END = date(2026, 1, 1), date(2026, 12, 31)


@pytest.mark.parametrize(("r2", "used"), [(0.0, False), (0.749, False), (0.75, True), (0.98, True)])
def test_a_line_is_used_only_from_the_reliable_r2_up(r2, used):
    verdict = baseline.judge(Line(60.0, 30.0, r2, 300), START, END, fitted=True)
    assert (verdict.line is not None) is used
    if not used:
        assert verdict.words("kWh").startswith(
            f"No reliable model: the weather explains only {round(100 * r2)} % of the daily use"
        )


def test_a_fitted_baseline_needs_enough_days_but_a_set_period_is_the_engineers_choice():
    short = Line(2.0, 10.0, 1.0, baseline.MIN_DAYS - 1)
    assert baseline.judge(short, START, END, fitted=True).line is None
    assert "at least 28 needed" in baseline.judge(short, START, END, fitted=True).reason
    assert baseline.judge(short, START, END, fitted=False).line is short
    assert baseline.judge(Line(2.0, 10.0, 1.0, baseline.MIN_DAYS), START, END, True).line


def test_no_line_at_all_says_why():
    verdict = baseline.judge(None, START, END, fitted=True)
    assert verdict.line is None and verdict.days == 0
    assert "only 0 days with both use and outside temperature" in verdict.reason


def test_the_window_is_the_set_period_else_the_year_before():
    assert baseline.window(START, END, date(2027, 3, 1)) == (START, END, False)
    assert baseline.window(None, None, date(2027, 3, 1)) == (
        date(2026, 3, 1), date(2027, 2, 28), True
    )  # fmt: skip


@pytest.mark.parametrize(
    ("actual", "expected", "words"),
    [
        (1288.1, 1000.0, "Used 288 kWh (£20) more than expected"),  # the case
        (712.0, 1000.0, "Used 288 kWh (£20) less than expected"),
        (22.5, 22.0, "Used 0.5 kWh (£0.04) more than expected"),
        (100.0, 100.0, "Used as expected"),
        (None, 100.0, None),
    ],
)
def test_over_and_under_are_said_in_words(actual, expected, words):
    assert wording.against_expected(actual, expected, "kWh", 0.07, "£") == words


def test_percentages_say_over_or_under():
    assert wording.percent_over_under(112.3, 100.0) == "12.3 % over expected"
    assert wording.percent_over_under(96.0, 100.0) == "4.0 % under expected"
    assert wording.percent_over_under(100.0, 100.0) == "as expected"
    assert wording.percent_over_under(10.0, 0.0) is None  # nothing expected: no percentage
