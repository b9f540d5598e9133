"""Every DRF write's JSON body is bounded in depth and size.

`[` x 100,000 to /api/v1/bookings was a 500 (RecursionError in the json module, which DRF's
parser does not catch). Now: too deep is a 400, too big a 413, on every endpoint, because the
parser is the default of all of them (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES).
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from core.parsers import nesting_depth_exceeds

WRITE_ENDPOINTS = [
    ("post", "/api/v1/bookings"),
    ("post", "/api/v1/zones"),
    ("post", "/api/v1/nodes"),
    ("post", "/api/v1/sensors"),
    ("post", "/api/v1/displays"),
    ("post", "/api/v1/feeds"),
]


def _send(client, method: str, path: str, body: bytes):
    return getattr(client, method)(path, body, content_type="application/json")


@pytest.mark.parametrize(("method", "path"), WRITE_ENDPOINTS)
def test_a_hundred_thousand_open_brackets_is_a_400_not_a_500(engineer_api, method, path):
    response = _send(engineer_api, method, path, b"[" * 100_000)
    assert response.status_code == 400, response.content[:200]
    assert "nested" in response.json()["error"]


@pytest.mark.parametrize(("method", "path"), WRITE_ENDPOINTS)
def test_a_deep_but_complete_document_is_a_400(engineer_api, method, path):
    """Deep enough to pass the json module but past BMS_JSON_MAX_DEPTH."""
    depth = settings.BMS_JSON_MAX_DEPTH + 1
    body = ('{"title": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}").encode()
    response = _send(engineer_api, method, path, body)
    assert response.status_code == 400
    assert f"deeper than {settings.BMS_JSON_MAX_DEPTH}" in response.json()["error"]


def test_at_the_depth_limit_the_body_reaches_validation(engineer_api):
    """Exactly BMS_JSON_MAX_DEPTH levels parse; the serializer then names the bad field."""
    depth = settings.BMS_JSON_MAX_DEPTH
    body = '{"zone": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    response = _send(engineer_api, "post", "/api/v1/bookings", body.encode())
    assert response.status_code == 400
    assert "zone" in response.json()["fields"]


def test_a_body_over_the_size_limit_is_a_413(engineer_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    big = json.dumps({"title": "x" * 10_000}).encode()
    response = _send(engineer_api, "post", "/api/v1/zones", big)
    assert response.status_code == 413
    assert "10000 bytes" in response.json()["error"]
    at_limit = json.dumps({"name": "x" * (10_000 - 20)}).encode()
    assert len(at_limit) <= 10_000
    # at the limit the body is parsed: the serializer's 400 (name too long), not a 413
    assert _send(engineer_api, "post", "/api/v1/zones", at_limit).status_code == 400


def test_a_real_booking_still_goes_through(engineer_api):
    zone = engineer_api.post("/api/v1/zones", {"name": "Hall", "slug": "hall"}, format="json")
    assert zone.status_code == 201, zone.content
    booking = {
        "zone": zone.json()["id"],
        "title": "Yoga",
        "start": "2030-01-07T10:00:00Z",
        "end": "2030-01-07T12:00:00Z",
    }
    assert engineer_api.post("/api/v1/bookings", booking, format="json").status_code == 201


def test_anonymous_deep_json_is_refused_before_parsing(anon_api):
    assert _send(anon_api, "post", "/api/v1/bookings", b"[" * 100_000).status_code == 401


def test_depth_counting():
    assert not nesting_depth_exceeds([], 1)
    assert nesting_depth_exceeds([[]], 1)
    assert not nesting_depth_exceeds({"a": [1, {"b": 2}]}, 3)
    assert nesting_depth_exceeds({"a": [1, {"b": []}]}, 3)
    deep: list = []
    for _ in range(100_000):  # far past the recursion limit: the check has its own stack
        deep = [deep]
    assert nesting_depth_exceeds(deep, 32)
