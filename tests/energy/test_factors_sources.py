"""The default emission factors are the DESNZ 2023 flat file's rows (v1.1, 20 June 2023),
rounded to 5 decimals, and docs/ENERGY.md states the same numbers (docs/ENERGY.md "Values
checked against sources"). The unrounded values are copied from the flat file, not computed."""

from __future__ import annotations

from pathlib import Path

from energy.benchmarks import DEFAULT_FACTORS, TM46_TYPICAL

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


def test_energy_doc_marks_each_unchecked_tm46_row_as_not_verified():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Values checked against sources", 1)[1]
    for category in ("workshop", "storage", "hotel"):
        bench = TM46_TYPICAL[category]
        row = next(
            line for line in section.splitlines() if line.startswith(f"| TM46 {bench.label}")
        )
        assert "not verified" in row, row
