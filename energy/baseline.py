"""Which baseline a building's expected use may come from, and why none when none fits.

Pure: no Django, no database (dates written as core/dates.py writes them) (docs/ENERGY.md "Baseline without a model"). A building with a
baseline period set (MeterNode.baseline_start/end) is fitted over it; one without is fitted
over the year of its own data before the range shown, so a building nobody modelled still
gets the expected use its data supports. A line is used only when the weather explains
enough of the use: R² below RELIABLE_R2 is "no reliable model", never a line drawn as if it
were one (an electricity baseline of R² 0.000 drawn as a model made its CUSUM saw-tooth
±45 kWh a week, issue #28). The threshold is the rule of thumb of the Carbon Trust's
*Monitoring and targeting* guide (CTG008) and of CIBSE TM22 for a usable performance line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from core.dates import day_text
from energy.regression import Line

RELIABLE_R2 = 0.75
AUTO_DAYS = 365  # a fitted baseline looks back this far from the first day shown
MIN_DAYS = 28  # a fitted baseline needs this many days with both use and degree days


@dataclass(frozen=True)
class Baseline:
    """The verdict on one building and fuel: `line` is set only when it may be used."""

    start: date
    end: date
    fitted: bool  # True: fitted from the building's own data, no baseline period was set
    line: Line | None  # the usable line, None when none fits
    r2: float | None  # of the line fitted, also when it is not reliable
    days: int  # days the fit used
    reason: str | None  # plain words: why there is no usable line

    def words(self, unit: str) -> str:
        """What a manager reads next to the figures: where expected use comes from."""
        span = f"{day_text(self.start)} to {day_text(self.end)}"
        if self.line is None:
            return f"No reliable model: {self.reason}"
        how = (
            "a baseline fitted from this building's own use"
            if self.fitted
            else "the building's baseline period"
        )
        share = round(100 * (self.r2 or 0))
        return (
            f"Expected use from {how}, {span}: {self.line.base_load:.0f} {unit} a day "
            f"+ {self.line.slope:.1f} {unit} for each degree day colder than the heating base; "
            f"the weather explains {share} % of the daily use over {self.days} days."
        )


def window(baseline_start: date | None, baseline_end: date | None, first: date):
    """(start, end, fitted): the baseline period set, else the AUTO_DAYS before `first`."""
    if baseline_start and baseline_end:
        return baseline_start, baseline_end, False
    return first - timedelta(days=AUTO_DAYS), first - timedelta(days=1), True


def judge(line: Line | None, start: date, end: date, fitted: bool) -> Baseline:
    """Use the line only if it is fitted on MIN_DAYS or more and R² >= RELIABLE_R2."""
    span = f"{day_text(start)} to {day_text(end)}"
    # a period an engineer set is theirs to choose (a perfect 10-day line is a line); a
    # fitted one must cover enough days that a chance fit of a few days is not taken for it
    if line is None or (fitted and line.n < MIN_DAYS):
        n = 0 if line is None else line.n
        reason = (
            f"only {n} day{'s' if n != 1 else ''} with both use and outside temperature "
            f"from {span}"
            + (f" (at least {MIN_DAYS} needed)" if fitted else "")
            + ", so no expected use is shown. "
            "Import a model to compare."
        )
        return Baseline(start, end, fitted, None, None if line is None else line.r2, n, reason)
    if line.r2 is None or line.r2 < RELIABLE_R2:
        r2 = line.r2 or 0.0
        reason = (
            f"the weather explains only {round(100 * r2)} % of the daily use from {span} "
            f"(R² {r2:.2f}, below {RELIABLE_R2}), so no expected use or CUSUM is shown. "
            "Import a model to compare."
        )
        return Baseline(start, end, fitted, None, line.r2, line.n, reason)
    return Baseline(start, end, fitted, line, line.r2, line.n, None)
