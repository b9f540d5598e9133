"""core/words.py: counts with their noun, and names made safe to print on one line."""

from __future__ import annotations

import pytest

from core.words import counted, one_line


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 spells"), (1, "1 spell"), (2, "2 spells"), (-1, "-1 spells")]
)
def test_a_count_takes_its_nouns_plural_except_for_one(n, text):
    assert counted(n, "spell") == text


def test_an_irregular_plural_is_given():
    assert (counted(1, "child", "children"), counted(3, "child", "children")) == (
        "1 child",
        "3 children",
    )


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("Hall", "Hall"), ("Hall\nEast", "Hall East"), ("Hall\r\n East", "Hall East"),
     ("\tHall\x00\x07\x1b[31m", "Hall [31m"), ("a\u2028b\u2029c\x85d", "a b c d"),
     ("Café – 2 °C", "Café – 2 °C"), ("", "")],
)  # fmt: skip
def test_one_line_turns_every_control_character_and_break_into_one_space(raw, clean):
    assert one_line(raw) == clean


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("Hall\u202eTSAE", "HallTSAE"), ("\u202aa\u202bb\u202cc\u202dd\u202e", "abcd"),
     ("\u2066Hall\u2067 \u2068East\u2069", "Hall East"), ("a\u200eb\u200fc\u061cd", "abcd"),
     ("\u2029\u202e", ""), ("שלום Hall", "שלום Hall")],
)  # fmt: skip
def test_one_line_drops_bidi_controls_and_keeps_right_to_left_letters(raw, clean):
    assert one_line(raw) == clean
