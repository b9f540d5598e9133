"""control/engine/ is pure: it imports nothing but the standard library, simple-pid and itself.

No Django, Redis or Celery, and nothing of ours outside control.engine, at module level or
inside a function: so the evaluation runs the same in the live tick, from the configuration
cache while the database is away, in replay, and in a test with hand-made specs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from control.engine import timefmt
from core import dates

ENGINE = Path(__file__).resolve().parents[2] / "control" / "engine"
FIRST_PARTY = {"bms", "core", "sensors", "feeds", "alarms", "control", "energy", "displays"}
FORBIDDEN = FIRST_PARTY | {"django", "redis", "celery", "rest_framework", "kombu"}


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


@pytest.mark.parametrize("path", sorted(ENGINE.rglob("*.py")), ids=lambda p: p.name)
def test_an_engine_module_imports_only_the_engine_and_pure_libraries(path):
    bad = [
        name
        for name in _imports(path)
        if name.split(".")[0] in FORBIDDEN and not name.startswith("control.engine")
    ]
    assert bad == [], f"{path.relative_to(ENGINE.parent.parent)} imports {bad}"


def test_the_whole_engine_loads_without_django():
    """In a fresh interpreter with no settings: nothing impure is pulled in on the way."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import control.engine as e\n"
        "for m in pkgutil.walk_packages(e.__path__, 'control.engine.'):\n"
        "    importlib.import_module(m.name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r}\n"
        "             and m != 'control' and not m.startswith('control.engine'))\n"
        "print(bad)\n"
    )
    root = ENGINE.parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 24, 15, 1, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC),  # the spring-forward morning
        datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
    ],
)
def test_the_engine_writes_dates_the_one_way_core_does(moment):
    """The engine keeps its own two lines of core/dates.py (it may not import core): they must
    write what core writes, so a control reason reads like every other date on the site."""
    london = ZoneInfo("Europe/London")
    assert timefmt.when_text(moment, london) == dates.when_text(moment, london)
    assert timefmt.when_text(moment) == dates.when_text(moment)
    assert timefmt.day_text(date(2026, 11, 24)) == dates.day_text(date(2026, 11, 24))
