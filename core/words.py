"""Plain words for people: a count with its noun ("1 spell", "3 spells") and a name made safe to
print on one line (a subject line, a digest's numbered list), in its own direction. No Django."""

from __future__ import annotations

import re
import unicodedata


def counted(n: int, one: str, many: str | None = None) -> str:
    """'1 spell', '0 spells', '3 spells'; `many` for a plural that is not `one` + 's'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


# Unicode's line and paragraph separators end a line as '\n' does in most mail readers.
_BREAKS = {"Cc", "Zl", "Zp"}
_SPACES = re.compile(r"\s+")
# Bidi controls: embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069) and the
# marks (U+200E, U+200F, U+061C). A zone named with U+202E printed the rest of its line, the
# finding's subject and what followed, reversed (an outside tester, #30). None carries a
# letter, so each is dropped, not spaced.
_BIDI = dict.fromkeys(
    [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C], None
)


def one_line(text: str) -> str:
    """`text` with every control character and line break as a space, runs of spaces as one,
    bidi controls dropped, trimmed: a zone named 'Hall\\nX' prints as 'Hall X', never as a
    second line that reads as another finding or header, nor a line printed backwards."""
    cleaned = "".join(" " if unicodedata.category(c) in _BREAKS else c for c in text)
    return _SPACES.sub(" ", cleaned.translate(_BIDI)).strip()
