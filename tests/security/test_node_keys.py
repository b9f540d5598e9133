"""Node write keys: hashed at rest, compared in constant time, rotated from the API, the CLI
and the admin, each time with the old key refused at once and the new one accepted."""

from __future__ import annotations

import hmac
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from sensors import cache, keys
from sensors.models import Node
from tests.wsgi_client import WsgiClient as Client


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    cache.clear_all()
    yield
    cache.clear_all()


def _cli_create(name: str) -> str:
    out = StringIO()
    call_command("createnode", name, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _cli_rotate(name: str) -> str:
    out = StringIO()
    call_command("createnode", name, "--rotate", stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _everything_stored(redis_client) -> str:
    """Every row of every table (raw SQL, not just what dumpdata knows) and all of Redis."""
    parts = []
    out = StringIO()
    call_command("dumpdata", stdout=out)
    parts.append(out.getvalue())
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            parts.extend(repr(row) for row in cursor.fetchall())
    for key in redis_client.scan_iter():
        parts.append(repr(key))
        kind = redis_client.type(key)
        if kind == b"string":
            parts.append(repr(redis_client.get(key)))
        elif kind == b"hash":
            parts.append(repr(redis_client.hgetall(key)))
        elif kind == b"list":
            parts.append(repr(redis_client.lrange(key, 0, -1)))
        elif kind == b"set":
            parts.append(repr(redis_client.smembers(key)))
        elif kind == b"stream":  # accepted ingest requests (sensors/ingest/stream.py)
            parts.append(repr(redis_client.xrange(key)))
    return "\n".join(parts)


def _posts_ok(key: str, node: str) -> bool:
    response = Client().get("/input/post", {"node": node, "json": "power:1", "apikey": key})
    return response.status_code == 200


def test_plaintext_keys_are_nowhere_at_rest(db, redis_client, engineer_api, admin_client):
    issued = {"cli": _cli_create("cli-node")}
    created = engineer_api.post("/api/v1/nodes", {"name": "api-node"}, format="json")
    assert created.status_code == 201
    issued["api"] = created.json()["write_key"]
    api_id = created.json()["id"]
    issued["api-rotated"] = engineer_api.post(f"/api/v1/nodes/{api_id}/rotate-key").json()[
        "write_key"
    ]
    issued["cli-rotated"] = _cli_rotate("cli-node")
    response = admin_client.post(
        "/admin/sensors/node/",
        {"action": "rotate_write_key", "_selected_action": [api_id]},
        follow=True,
    )
    issued["admin-rotated"] = next(
        str(m).split(": ")[1].split(" ")[0] for m in response.context["messages"]
    )
    # Use the live keys on the ingest path too, so caches and queues are populated.
    assert _posts_ok(issued["cli-rotated"], "cli-node")
    assert _posts_ok(issued["admin-rotated"], "api-node")

    stored = _everything_stored(redis_client)
    for how, key in issued.items():
        assert len(key) == keys.KEY_LENGTH, how
        assert key not in stored, f"the {how} key is stored in plain text"
        assert key.upper() not in stored
    node = Node.objects.get(name="api-node")
    assert node.key_hash == keys.hash_key(issued["admin-rotated"])  # only the hash is kept
    assert node.key_hash in stored


def test_rotation_refuses_the_old_key_at_once(db, redis_client, engineer_api):
    old = _cli_create("rot-node")
    assert _posts_ok(old, "rot-node")  # cached as valid in this process
    node_id = Node.objects.get(name="rot-node").pk

    new_api = engineer_api.post(f"/api/v1/nodes/{node_id}/rotate-key").json()["write_key"]
    cache.clear_all()  # what the on_commit signal does after a real transaction
    assert not _posts_ok(old, "rot-node")
    assert _posts_ok(new_api, "rot-node")

    new_cli = _cli_rotate("rot-node")
    cache.clear_all()
    assert not _posts_ok(new_api, "rot-node")
    assert _posts_ok(new_cli, "rot-node")


def test_viewer_cannot_rotate_keys(db, viewer_api):
    key = _cli_create("viewer-target")
    node = Node.objects.get(name="viewer-target")
    assert viewer_api.post(f"/api/v1/nodes/{node.pk}/rotate-key").status_code == 403
    node.refresh_from_db()
    assert keys.key_matches(key, node.key_hash)


def test_keys_are_compared_in_constant_time(db, monkeypatch):
    """Every key check goes through hmac.compare_digest on the hashes, never `==`."""
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys.hmac, "compare_digest", spy)
    key = _cli_create("ct-node")
    wrong = key[:-1] + ("0" if key[-1] != "0" else "1")  # same prefix, last digit differs
    assert Node.for_key(key) is not None
    assert Node.for_key(wrong) is None
    assert len(calls) == 2
    assert all(len(a) == len(b) == 64 for a, b in calls)  # SHA-256 hex digests, not the keys


def test_only_the_prefix_and_hash_columns_hold_key_material(db):
    key = _cli_create("cols-node")
    node = Node.objects.get(name="cols-node")
    assert node.key_prefix == key[: keys.PREFIX_LENGTH]
    assert node.key_hash == keys.hash_key(key) != key
