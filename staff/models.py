"""Where each control zone is in the metering tree.

Control (zones) and energy (the metering tree of buildings) sit on one layer and may not
import each other, so the link between them lives here, in the layer above both: a zone is
placed at a node of the tree (its building, a floor or its own room node), and "every zone of
the Lecture block" is every zone placed at the building or anywhere below it.
"""

from __future__ import annotations

from django.db import models

from control.models import Zone
from energy.models import MAX_TREE_DEPTH, MeterNode


class ZonePlace(models.Model):
    zone = models.OneToOneField(Zone, on_delete=models.CASCADE, related_name="place")
    node = models.ForeignKey(MeterNode, on_delete=models.CASCADE, related_name="zone_places")

    def __str__(self) -> str:
        return f"{self.zone} in {self.node}"


def nodes_below(node: MeterNode) -> list[int]:
    """The node and every node under it (bounded by the tree's own depth limit)."""
    found, level = [node.pk], [node.pk]
    for _depth in range(MAX_TREE_DEPTH + 1):
        level = list(MeterNode.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        if not level:
            break
        found += level
    return found


def zones_in(node: MeterNode) -> list[Zone]:
    """Every zone placed at `node` or below it, by name."""
    return list(Zone.objects.filter(place__node_id__in=nodes_below(node)).order_by("name"))
