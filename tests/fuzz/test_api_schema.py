"""schemathesis against our OpenAPI schema, in-process on the WSGI app, as an engineer.

Every operation of /api/schema/ gets generated requests, valid and invalid (schemathesis's
positive and negative modes). Asserted: never a 5xx. How fast is bench/'s question, not a test's (#24).
Examples per operation: tests/fuzz/profiles.py (HYPOTHESIS_PROFILE=soak for many more).
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from knox.models import AuthToken

from tests.fuzz.profiles import API_FUZZ, API_FUZZ_CONFIG


def _raw_schema() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated))


APP = get_wsgi_application()
schema = schemathesis.openapi.from_dict(_raw_schema(), config=API_FUZZ_CONFIG)
schema.app = APP


@pytest.fixture
def keep_test_connection():
    """Django closes the database connection after each request; the test transaction needs
    it open (the test Client does the same)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def engineer_token(engineer) -> str:
    return AuthToken.objects.create(user=engineer)[1]


@pytest.fixture
def seeded(db):
    """A few real objects so generated ids sometimes hit something (1, 2, 3...)."""
    from control.models import Zone
    from feeds.models import Feed
    from sensors.models import Node, Site

    site = Site.objects.create(name="Fuzz site", slug="fuzz")
    for i in range(3):
        Feed.objects.create(name=f"f{i}", tag="fuzz", interval=10)
        node = Node(name=f"fuzz-node-{i}", node_id=20 + i, site=site)
        node.set_new_key()
        node.save()
        Zone.objects.create(name=f"Zone {i}", slug=f"zone-{i}")
    return site


@schema.parametrize()
@API_FUZZ
def test_no_server_error(case, keep_test_connection, engineer_token, seeded, redis_client):
    response = case.call(headers={"Authorization": f"Token {engineer_token}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}\n"
        f"reproduce: {case.as_curl_command()}"
    )
