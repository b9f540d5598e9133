"""The tree is the architecture: no module of ours imports itself back through others, and the
README's Layout names every app that exists. Which app may import which is the import contract
(`.importlinter`, run by `.ci/run`)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
OUR_PACKAGES = ("bms", "demo", "staff", "displays", "control", "energy", "sensors", "alarms", "feeds", "core")  # fmt: skip


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan's strongly
    connected components), counting imports inside functions as grimp does."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_back_through_others():
    graph = grimp.build_graph(*OUR_PACKAGES, cache_dir=None)
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for importer, imported in [("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [["a.x", "a.y", "a.z"]]


def test_readme_layout_names_every_app_and_only_those():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"^(\w+)/", layout, flags=re.M))
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages <= named
    assert named - packages <= {"tests", "docker", "bench", "scripts", "docs"}


def test_import_contract_layers_every_app():
    contract = (ROOT / ".importlinter").read_text()
    layers = contract.split("layers =", 1)[1]
    layered = set(re.findall(r"\b(\w+)\b", layers.split("\n\n", 1)[0]))
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages <= layered
