"""Every file path cited in the docs and in code comments exists in the tree.

A comment or doc that names a file which has moved sends the reader to nothing; when modules
move, the citations must move with them. What is scanned:

- README.md and docs/*.md, every line;
- comments and docstrings (any bare string statement) of every *.py outside migrations;
- comments of shell scripts, nginx/other .conf files, Dockerfiles, compose and other YAML files,
  HTML templates, JavaScript and CSS.

A citation is a repository-relative path that starts with a top-level directory of the tree,
e.g. `control/engine/evaluator.py`, `core/static/core/live.js:40`, `docs/FEEDS.md#layout`,
`scripts/run-site.sh`. To keep prose such as "sensors/actuators" out, a candidate counts when
its last part has a file extension, it ends in `/`, it has at least two slashes, or it stands
alone in backticks. Not citations: URLs and URL paths (anything right after a `/` or `:`),
paths with placeholders (`feeds/<id>.dat`, `tests/*/`, `{app}`), and the runtime data under
var/. Paths .gitignore keeps out of the tree (docker/.env) are the operator's to create and
count as present; so does a migration named app/NNNN when that migration exists. A Django template or static name (`control/replay.html`, `core/live.js`) counts as
present when it exists under some app's templates/ or static/ directory, which is how Django
looks it up.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SKIP_DIRS = {
    ".git",
    ".venv",
    ".venv-bacnet-peer",
    "node_modules",
    "var",
    "migrations",
    "__pycache__",
}
# Top-level names whose contents are never ours to cite: runtime data and installed packages.
NOT_CITABLE_ROOTS = {".git", ".venv", ".venv-bacnet-peer", "node_modules", "var", "__pycache__"}

HASH_COMMENT_SUFFIXES = {".sh", ".conf", ".yaml", ".yml", ".toml", ".cfg", ".ini"}
HASH_COMMENT_NAMES = {"Dockerfile", "run", "emoncms-compare"}
SLASH_COMMENT_SUFFIXES = {".js", ".css"}
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
# A placeholder or glob right after the matched part means the path is a pattern, not a file.
PATTERN_CHARS = set("*<{$%[")


def top_level_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in NOT_CITABLE_ROOTS)


def citation_pattern(roots: list[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(r) for r in sorted(roots, key=len, reverse=True))
    # Not after a word character, a dot, a slash, a dash or a colon: that would be part of a
    # longer path, an absolute path, a URL path or a host:port. A leading run of ../ (a
    # relative link out of docs/) is allowed and dropped.
    return re.compile(rf"(?<![\w./:@-])(?:\.\./)*((?:{names})/[\w./+-]*)")


def candidates(text: str, pattern: re.Pattern[str]) -> Iterator[str]:
    text = URL.sub(lambda m: " " * len(m.group()), text)
    for match in pattern.finditer(text):
        path = match.group(1)
        after = text[match.end() : match.end() + 1]
        before = text[match.start() - 1 : match.start()] if match.start() else ""
        if after in PATTERN_CHARS or "..." in path:
            continue
        path = path.rstrip(".")
        last = path.rstrip("/").rsplit("/", 1)[-1]
        in_backticks = before == "`" and after == "`"
        if EXTENSION.search(last) or path.endswith("/") or path.count("/") >= 2 or in_backticks:
            yield path


def python_comment_lines(source: str) -> Iterator[tuple[int, str]]:
    """Comments and bare string statements (docstrings), with the line each line of text is on."""
    previous = tokenize.NEWLINE
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for token in tokens:
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING and previous in (
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.NL,
        ):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type


def hash_comment_lines(source: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            yield number, stripped
        elif " #" in line:
            yield number, line[line.index(" #") :]


def block_comment_lines(
    source: str, opener: str, closer: str, line_opener: str | None = None
) -> Iterator[tuple[int, str]]:
    inside = False
    for number, line in enumerate(source.splitlines(), 1):
        rest = line
        while rest:
            if inside:
                end = rest.find(closer)
                yield number, rest if end < 0 else rest[:end]
                if end < 0:
                    break
                inside, rest = False, rest[end + len(closer) :]
            else:
                start = rest.find(opener)
                line_start = rest.find(line_opener) if line_opener else -1
                if line_start >= 0 and (start < 0 or line_start < start):
                    # "://" in a URL is not a // comment.
                    if rest[max(line_start - 1, 0) : line_start] != ":":
                        yield number, rest[line_start:]
                        break
                if start < 0:
                    break
                inside, rest = True, rest[start + len(opener) :]


def html_comment_lines(source: str) -> Iterator[tuple[int, str]]:
    yield from block_comment_lines(source, "<!--", "-->")
    yield from block_comment_lines(source, "{#", "#}")
    yield from block_comment_lines(source, "{% comment %}", "{% endcomment %}")


def commented_lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    if path.suffix == ".md":
        yield from enumerate(source.splitlines(), 1)
    elif path.suffix == ".py":
        yield from python_comment_lines(source)
    elif path.suffix == ".html":
        yield from html_comment_lines(source)
    elif path.suffix in SLASH_COMMENT_SUFFIXES:
        yield from block_comment_lines(source, "/*", "*/", line_opener="//")
    elif (
        path.suffix in HASH_COMMENT_SUFFIXES
        or path.name in HASH_COMMENT_NAMES
        or path.name.startswith(("Dockerfile", "compose"))
    ):
        yield from hash_comment_lines(source)


def scanned_files(root: Path) -> Iterator[Path]:
    yield root / "README.md"
    yield from sorted((root / "docs").glob("*.md"))
    for directory, subdirs, files in os.walk(root):
        # Pruned in place, so os.walk never descends into them (nor follows the symlinked
        # .venv and node_modules of a worktree).
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS)
        for name in sorted(files):
            path = Path(directory) / name
            if path.suffix != ".md":  # only README.md and docs/*.md, above
                yield path


def ignored_patterns(root: Path) -> list[str]:
    gitignore = root / ".gitignore"
    if not gitignore.exists():
        return []
    lines = (line.strip() for line in gitignore.read_text().splitlines())
    return [line for line in lines if line and not line.startswith(("#", "!"))]


def is_ignored(cited: str, patterns: list[str]) -> bool:
    """A path .gitignore keeps out of the tree (docker/.env, docker/certs/) is the operator's to
    create: the docs rightly tell them to, so it cannot be in the tree to check against."""
    parts = cited.rstrip("/").split("/")
    for pattern in patterns:
        bare = pattern.strip("/")
        if "/" in bare:  # anchored at the root: a prefix of the path
            if cited.rstrip("/") == bare or cited.startswith(bare + "/"):
                return True
        elif any(fnmatch.fnmatchcase(part, bare) for part in parts):
            return True
    return False


def exists(root: Path, cited: str) -> bool:
    if (root / cited).exists():
        return True
    # A migration as Django names it, app/NNNN (as in `migrate sensors 0002`).
    migration = re.fullmatch(r"(\w+)/(\d{4})", cited)
    if migration:
        app, number = migration.groups()
        return any((root / app / "migrations").glob(f"{number}_*.py"))
    # A Django template or static file named as Django finds it: <app>/templates/<cited>.
    return any(
        (app / kind / cited).exists()
        for app in root.iterdir()
        if app.is_dir() and app.name not in NOT_CITABLE_ROOTS
        for kind in ("templates", "static")
    )


def missing_citations(root: Path) -> list[str]:
    pattern = citation_pattern(top_level_dirs(root))
    ignored = ignored_patterns(root)
    problems = []
    for path in scanned_files(root):
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary example data
        for number, text in commented_lines(path, source):
            for cited in candidates(text, pattern):
                if not exists(root, cited) and not is_ignored(cited, ignored):
                    problems.append(f"{path.relative_to(root)}:{number}: {cited}")
    return problems


def test_every_cited_path_exists() -> None:
    problems = missing_citations(ROOT)
    assert not problems, "files cited but not in the tree:\n" + "\n".join(problems)


def test_it_finds_a_stale_path_in_a_comment(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("See docs/GONE.md#top and docs/HERE.md.\n")
    (tmp_path / "docs" / "HERE.md").write_text("Back to the [README](../README.md).\n")
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "tick.py").write_text(
        '"""Runs what control/state.py:12 decided."""\n'
        "X = 'control/not_a_comment.py'  # see `control/tick.py`\n"
    )
    assert missing_citations(tmp_path) == [
        "README.md:1: docs/GONE.md",
        "control/tick.py:1: control/state.py",
    ]


def test_it_ignores_urls_prose_and_patterns(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "sensors").mkdir()
    (tmp_path / "README.md").write_text(
        "Open http://localhost:8000/sensors/list.html or /sensors/gone.py;\n"
        "sensors/actuators are wired; data sits in sensors/<id>.dat and var/sensors/x.py.\n"
    )
    assert missing_citations(tmp_path) == []


def test_a_template_name_counts_when_an_app_has_it(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Drawn by control/replay.html and control/gone.html.\n")
    (tmp_path / "control" / "templates" / "control").mkdir(parents=True)
    (tmp_path / "control" / "templates" / "control" / "replay.html").write_text("")
    assert missing_citations(tmp_path) == ["README.md:1: control/gone.html"]


def test_operator_files_and_migrations_count_when_named_so(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / ".gitignore").write_text("docker/certs/\n.env\n")
    (tmp_path / "docker").mkdir()
    (tmp_path / "sensors" / "migrations").mkdir(parents=True)
    (tmp_path / "sensors" / "migrations" / "0002_unique_claims.py").write_text("")
    (tmp_path / "README.md").write_text(
        "cp docker/.env.example docker/.env; keys in docker/certs/privkey.pem;\n"
        "migration `sensors/0002` and `sensors/0003`.\n"
    )
    assert missing_citations(tmp_path) == [
        "README.md:1: docker/.env.example",
        "README.md:2: sensors/0003",
    ]
