"""The OpenAPI schema at /api/schema/ documents every operation.

Generated as `manage.py spectacular --validate --fail-on-warn` does: the command must pass,
and every operation must have a summary, a description saying who may call it, a tag of its
area, and the device-facing endpoints (ingest, emoncms, node commands) must be present.
"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from drf_spectacular.validation import validate_schema

from core.openapi import TAGS

METHODS = ("get", "post", "put", "patch", "delete")
DEVICE_PATHS = {
    "/api/v1/readings/": {"post"},
    "/input/post": {"get", "post"},
    "/input/post.json": {"get", "post"},
    "/input/bulk": {"get", "post"},
    "/input/bulk.json": {"get", "post"},
    "/feed/list.json": {"get"},
    "/feed/timevalue.json": {"get"},
    "/feed/data.json": {"get"},
    "/feed/csvexport.json": {"get"},
    "/feed/value.json": {"get"},
    "/feed/fetch.json": {"get"},
    "/feed/export.json": {"get"},
    "/feed/average.json": {"get"},
    "/feed/getmeta.json": {"get"},
    "/feed/get.json": {"get"},
    "/feed/aget.json": {"get"},
    "/feed/buffersize.json": {"get"},
    "/feed/create.json": {"get"},
    "/feed/insert.json": {"get"},
    "/feed/post.json": {"get"},
    "/input/list.json": {"get"},
    "/input/get": {"get"},
    "/input/get/{node}": {"get"},
    "/input/get/{node}/{name}": {"get"},
    "/input/getinputs.json": {"get"},
    "/input/process/get.json": {"get"},
    "/input/process/set.json": {"post"},
    "/user/auth.json": {"post"},
    "/describe": {"get"},
    "/version": {"get"},
    "/api/v1/nodes/{node_id}/commands": {"get"},
    "/api/v1/nodes/{node_id}/commands/{command_id}/ack": {"post"},
}


@pytest.fixture(scope="module")
def schema() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated))


def _operations(schema: dict):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_schema_validates_without_warnings(tmp_path):
    """The documented command: any drf-spectacular warning (unresolvable view, bad example
    type) fails it."""
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert out.stat().st_size > 10_000


def test_schema_is_valid_openapi(schema):
    validate_schema(schema)


def test_every_operation_has_summary_description_and_area_tag(schema):
    known = {name for name, _ in TAGS}
    bad = []
    for path, method, op in _operations(schema):
        tags = set(op.get("tags", []))
        if not op.get("summary") or "Who may call" not in op.get("description", ""):
            bad.append(f"{method.upper()} {path}: no summary or no who-may-call description")
        if not tags or not tags <= known:
            bad.append(f"{method.upper()} {path}: tags {sorted(tags)} not among {sorted(known)}")
    assert not bad, "\n".join(bad)
    assert len(list(_operations(schema))) > 130


def test_device_endpoints_are_present(schema):
    for path, methods in DEVICE_PATHS.items():
        assert path in schema["paths"], path
        assert methods <= set(schema["paths"][path]), (path, set(schema["paths"][path]))


def test_main_operations_have_examples(schema):
    paths = schema["paths"]

    def examples(op: dict) -> list:
        found = []
        for media in op.get("requestBody", {}).get("content", {}).values():
            found += list(media.get("examples", {}))
        for response in op.get("responses", {}).values():
            for media in response.get("content", {}).values():
                found += list(media.get("examples", {}))
        for parameter in op.get("parameters", []):
            found += list(parameter.get("examples", {}))
        return found

    for path, method in [
        ("/api/v1/readings/", "post"),
        ("/api/v1/bookings/", "post"),
        ("/api/v1/overrides/", "post"),
        ("/api/v1/alarms/{id}/acknowledge/", "post"),
        ("/api/v1/feeds/{id}/data", "get"),
        ("/feed/data.json", "get"),
        ("/input/post", "post"),
        ("/input/bulk", "post"),
    ]:
        op = paths[path][method]
        assert examples(op), f"{method.upper()} {path} has no example"


def test_ingest_is_documented_with_the_node_key_and_its_errors(schema):
    op = schema["paths"]["/api/v1/readings/"]["post"]
    assert op["security"] == [{"nodeKey": []}]
    assert {"202", "400", "401", "403", "409", "413", "429"} <= set(op["responses"])
    schemes = schema["components"]["securitySchemes"]
    assert schemes["nodeKey"]["scheme"] == "bearer"
    assert schemes["staffTokenQuery"]["in"] == "query"
    assert {"nodeKey": []} in schema["paths"]["/input/bulk"]["post"]["security"]
