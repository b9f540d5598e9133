"""Plain words for people: a count with its noun ("1 spell", "3 spells") and a name made safe to
print on one line (a subject line, a digest's numbered list). No Django."""

from __future__ import annotations

import re
import unicodedata


def counted(n: int, one: str, many: str | None = None) -> str:
    """'1 spell', '0 spells', '3 spells'; `many` for a plural that is not `one` + 's'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


# Unicode's line and paragraph separators end a line as '\n' does in most mail readers.
_BREAKS = {"Cc", "Zl", "Zp"}
_SPACES = re.compile(r"\s+")


def one_line(text: str) -> str:
    """`text` with every control character and line break as a space, runs of spaces as one,
    trimmed: a zone named 'Hall\\nX' prints as 'Hall X', never as a second line that reads as
    another finding or header."""
    cleaned = "".join(" " if unicodedata.category(c) in _BREAKS else c for c in text)
    return _SPACES.sub(" ", cleaned).strip()
