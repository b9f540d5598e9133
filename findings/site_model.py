"""Find a rule's points in the site's Brick model (findings/needs.py says what a need is).

    model = SiteModel(site_graph())        # findings/brick.py, once a run
    model.bind(subject_classes, needs) -> [Binding(subject, {need name: [entity, ...]})]

A class matches itself and every subclass of it in the Brick ontology brickschema ships
(Brick 1.3, the version findings/brick.py writes), read from a table derived from it. Entities are the
model's own names, `urn:bms:<kind>-<id>`: `Entity.kind` and `Entity.pk` say which row of the
site model each is, so a check reads its rows in bulk.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rdflib import RDF, RDFS, Graph, URIRef

from findings.brick import BMS, BRICK
from findings.needs import Need, Step

BRICK_VERSION = "1.3"
# Each class a rule names (findings/needs.py) with its subclasses, as the Brick ontology says:
# derived from the ontology brickschema ships by `manage.py brick_subclasses` and checked
# against it in the tests. A file, not the ontology itself: loading the ontology takes a
# second and a half and holds about 80 MB in every process that runs the rules.
SUBCLASSES_FILE = Path(__file__).with_name("brick_subclasses.json")


@functools.cache
def _table() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in json.loads(SUBCLASSES_FILE.read_text()).items()}


def subclasses(cls: str) -> frozenset[URIRef]:
    """The class and every class under it in the Brick ontology."""
    try:
        names = _table()[cls]
    except KeyError:
        raise KeyError(
            f"brick:{cls} is not in {SUBCLASSES_FILE.name}: run `manage.py brick_subclasses`"
        ) from None
    return frozenset(BRICK[c] for c in names | {cls})


def derive(classes: Iterable[str]) -> dict[str, list[str]]:
    """Each class's subclasses from the Brick ontology (for the file and its test)."""
    import brickschema

    ontology = brickschema.Graph(load_brick=True, brick_version=BRICK_VERSION)
    table = {}
    for cls in sorted(set(classes)):
        if (BRICK[cls], None, None) not in ontology:
            raise ValueError(f"brick:{cls} is not a class of Brick {BRICK_VERSION}")
        under = ontology.transitive_subjects(RDFS.subClassOf, BRICK[cls])
        table[cls] = sorted({str(u).removeprefix(str(BRICK)) for u in under} - {cls})
    return table


def named_classes() -> set[str]:
    """Every class the rules name."""
    from findings.rules import RULES

    named = set()
    for rule in RULES.values():
        named.update(rule.subject)
        for need in rule.needs:
            for step in need.path:
                named.update(step.classes)
    return named


def _matching(classes: tuple[str, ...]) -> frozenset[URIRef]:
    return frozenset().union(*(subclasses(c) for c in classes))


@dataclass(frozen=True, order=True)
class Entity:
    """One thing of the site model as the Brick model names it ("zone", 3)."""

    kind: str
    pk: int

    @classmethod
    def of(cls, uri: URIRef) -> Entity | None:
        name = str(uri)
        if not name.startswith(str(BMS)):
            return None
        kind, _, pk = name.removeprefix(str(BMS)).rpartition("-")
        return cls(kind, int(pk)) if kind and pk.isdigit() else None


@dataclass
class Binding:
    subject: Entity
    points: dict[str, list[Entity]] = field(default_factory=dict)


class SiteModel:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def _of_class(self, uris: Iterable[URIRef], classes: tuple[str, ...]) -> list[URIRef]:
        wanted = _matching(classes)
        return [u for u in uris if any(t in wanted for t in self.graph.objects(u, RDF.type))]

    def _step(self, start: URIRef, step: Step) -> list[URIRef]:
        rel = BRICK[step.relation]
        if step.inverse:
            related = self.graph.subjects(rel, start)
        else:
            related = self.graph.objects(start, rel)
        return self._of_class((u for u in related if isinstance(u, URIRef)), step.classes)

    def follow(self, start: URIRef, path: tuple[Step, ...]) -> list[URIRef]:
        """Every entity the path reaches from `start`, each once, in name order."""
        reached = [start]
        for step in path:
            reached = sorted({u for r in reached for u in self._step(r, step)})
        return reached

    def bind(self, subject: tuple[str, ...], needs: tuple[Need, ...]) -> list[Binding]:
        """Each entity of a `subject` class with the points it has of each need, in (kind, id)
        order; one lacking a need that is not optional is left out."""
        wanted = _matching(subject)
        found = []
        for uri in set(self.graph.subjects(RDF.type, None)):
            if not isinstance(uri, URIRef) or (entity := Entity.of(uri)) is None:
                continue
            if not any(t in wanted for t in self.graph.objects(uri, RDF.type)):
                continue
            binding = Binding(entity)
            for need in needs:
                points = [e for u in self.follow(uri, need.path) if (e := Entity.of(u))]
                if need.absent:
                    if points:
                        break
                elif not points and not need.optional:
                    break
                binding.points[need.name] = points
            else:
                found.append(binding)
        return sorted(found, key=lambda b: b.subject)
