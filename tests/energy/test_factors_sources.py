"""The default emission factors are the DESNZ 2023 flat file's rows (v1.1, 20 June 2023),
rounded to 5 decimals, and docs/ENERGY.md states the same numbers (docs/ENERGY.md "Values
checked against sources"). The unrounded values are copied from the flat file, not computed."""

from __future__ import annotations

from pathlib import Path

from energy.benchmarks import CHECKED_TWICE, DEFAULT_FACTORS, ONE_SOURCE, TM46_TYPICAL

# factor id -> (fuel, kg CO2e per unit as the flat file gives it)
FLAT_FILE_2023 = {
    "7_400_4000_5_1": ("electricity", 0.207074289),  # Electricity: UK, kWh
    "1_100_1004_6_1": ("gas", 0.182928926),  # Natural gas, kWh (Gross CV)
    "1_101_1010_6_1": ("oil", 0.24677325),  # Burning oil, kWh (Gross CV)
    "10_401_4003_5_1": ("heat", 0.179646572),  # District heat and steam, kWh
    "17_404_4005_1_1": ("water", 0.176684547),  # Water supply, cubic metres
}
DOC = Path(__file__).resolve().parents[2] / "docs" / "ENERGY.md"


def test_default_factors_are_the_2023_flat_file_rounded_to_5_decimals():
    for factor_id, (fuel, raw) in FLAT_FILE_2023.items():
        assert DEFAULT_FACTORS[fuel] == round(raw, 5), factor_id


def test_energy_doc_states_each_default_factor_and_its_source_row():
    text = DOC.read_text(encoding="utf-8")
    for factor_id, (fuel, _) in FLAT_FILE_2023.items():
        assert f"{DEFAULT_FACTORS[fuel]:.5f}" in text, fuel
        assert factor_id in text, factor_id


def test_energy_doc_names_each_tm46_row_from_one_source_only():
    """Every row not confirmed by a second source is named in the doc's "one reproduction
    only" row, and the code marks the confirmed ones, and only those, as checked twice."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Values checked against sources", 1)[1]
    one_source_row = next(
        line for line in section.splitlines() if line.startswith("| TM46 rows from one")
    )
    assert "not checked against TM46 itself" in one_source_row
    for bench in TM46_TYPICAL.values():
        if bench.source == ONE_SOURCE:
            assert bench.label in one_source_row, bench.label
    verified = next(line for line in section.splitlines() if line.startswith("| TM46 General"))
    checked = {b.label for b in TM46_TYPICAL.values() if b.source == CHECKED_TWICE}
    assert checked == {
        "General office", "Cultural activities", "Swimming pool centre",
        "Dry sports and leisure facility", "Public buildings with light usage",
        "Schools and seasonal public buildings",
    }  # fmt: skip
    for label in checked:
        bench = next(b for b in TM46_TYPICAL.values() if b.label == label)
        assert f"{label} {bench.electricity} + {bench.fossil}" in verified, label


def test_energy_doc_table_of_tm46_rows_is_the_code():
    """An assessor recomputes a rating from docs/ENERGY.md: each category's row there must be
    what the code uses (typical values, weather shares, hours, fractions, separable uses)."""
    text = DOC.read_text(encoding="utf-8")
    for b in TM46_TYPICAL.values():
        row = next(
            line for line in text.splitlines() if line.startswith(f"| {b.label} (`{b.category}`)")
        )
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f"{b.electricity:g} + {b.fossil:g}", b.label
        assert cells[2] == f"{b.weather_electricity:g} / {b.weather_fossil:g}", b.label
        if b.hours_standard is None:
            assert cells[3] == "none" and cells[4] == "–", b.label
        else:
            assert cells[3].startswith(f"{b.hours_standard:,}–{b.hours_max:,} ("), b.label
            added = f"{b.occupancy_electricity:.0%} / {b.occupancy_fossil:.0%}"
            assert cells[4] == added, b.label
        assert cells[5] == (b.separable or "–"), b.label
