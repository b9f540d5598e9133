"""Find the shell blocks in the Markdown docs and the doc-test markers that govern them.

Pure functions, no Django: the harness (test_doc_commands.py) runs what this finds.
The marker convention is described at the top of test_doc_commands.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SHELL_LANGS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip\s*\((.+)\)$")
EXPECT = re.compile(r'^expect\s+"(.+)"$')
# A command line in an indented (4-space) code block: it would escape the harness.
COMMAND_START = re.compile(r"^(\.venv/bin/|curl |bash |docker |celery |python )")


class MarkerError(ValueError):
    """A `doc-test:` comment the harness does not understand."""


@dataclass
class Block:
    doc: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None = None  # the reason, when marked skip
    expect: list[str] = field(default_factory=list)
    fails: bool = False  # the block must exit non-zero (an error example)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    def script(self) -> str:
        """The commands to run: a console block keeps only its `$ ` lines (and their
        backslash continuations); other blocks run as written."""
        if self.lang != "console":
            return self.code
        lines, continuing = [], False
        for raw in self.code.splitlines():
            if raw.startswith("$ ") or continuing:
                text = raw[2:] if raw.startswith("$ ") and not continuing else raw
                lines.append(text)
                continuing = text.rstrip().endswith("\\")
        return "\n".join(lines) + "\n"


def parse_marker(text: str, block: Block) -> None:
    if m := SKIP.match(text):
        block.skip = m.group(1).strip()
    elif m := EXPECT.match(text):
        block.expect.append(m.group(1).replace('\\"', '"'))  # \" inside the quotes
    elif text == "fails":
        block.fails = True
    else:
        raise MarkerError(
            f'{block.id}: unknown marker "doc-test: {text}" '
            '(use: skip (reason) | expect "text" | fails)'
        )


def shell_blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced shell block of one Markdown file, with the markers written in the
    HTML comments directly above it (blank lines between them allowed)."""
    rel = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        if marker:
            pending.append(marker.group(1))
        elif fence:
            indent, ticks, lang = fence.groups()
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(ticks):
                # Fenced blocks inside list items are indented: drop that indent.
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            if lang in SHELL_LANGS:
                block = Block(rel, i - len(body), lang, "\n".join(body) + "\n")
                for text in pending:
                    parse_marker(text, block)
                blocks.append(block)
            elif pending:
                raise MarkerError(f"{rel}:{i - len(body)}: doc-test marker on a non-shell block")
            pending = []
        elif line.strip() and pending:
            raise MarkerError(f"{rel}:{i + 1}: doc-test marker not followed by a shell block")
        i += 1
    if pending:
        raise MarkerError(f"{rel}: doc-test marker at the end of the file")
    return blocks


def indented_commands(path: Path, root: Path) -> list[str]:
    """Commands written in 4-space indented code blocks, outside any fence: the harness
    would not run them, so they must be fenced instead."""
    rel = str(path.relative_to(root))
    found, in_fence = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and COMMAND_START.match(line.strip()):
            found.append(f"{rel}:{n}: {line.strip()}")
    return found


def markdown_links(path: Path) -> set[str]:
    """Targets of the relative Markdown links in a file, without #fragments."""
    text = path.read_text(encoding="utf-8")
    return {
        target.split("#")[0]
        for target in re.findall(r"\]\(([^)\s]+)\)", text)
        if not target.startswith(("http://", "https://", "#", "mailto:"))
    }
