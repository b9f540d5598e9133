"""Fixtures shared by the energy tests: a site and one office building on it."""

from __future__ import annotations

import pytest

from energy.models import MeterNode
from sensors.models import Site


@pytest.fixture
def site(db) -> Site:
    return Site.objects.create(name="CAT", slug="cat-demo")


@pytest.fixture
def office(site) -> MeterNode:
    return MeterNode.objects.create(site=site, name="Office", kind="building", floor_area_m2=500)
