"""What docs/API.md ("A person who logs in needs both") and MOVING_FROM_EMONCMS.md say about
logging in and keys, held from both sides: a `viewers` member without `is_staff` cannot log in,
with it can; the documented shell one-liner makes a user who can; an API token works without
`is_staff`; a staff token is refused on /input/post, a node key is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from core import api_tokens
from core.roles import VIEWERS
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _viewer(is_staff: bool) -> User:
    user = User.objects.create_user("alice", password="a long passphrase", is_staff=is_staff)
    user.groups.add(Group.objects.get(name=VIEWERS))
    return user


def _logs_in(client: Client) -> bool:
    client.post("/admin/login/", {"username": "alice", "password": "a long passphrase"})
    return client.get("/staff/").status_code == 200


def test_a_viewer_without_is_staff_cannot_log_in():
    _viewer(is_staff=False)
    client = Client()
    response = client.post("/admin/login/", {"username": "alice", "password": "a long passphrase"})
    assert response.status_code == 200  # the form again, not a redirect
    assert "staff account" in response.content.decode()
    assert not _logs_in(client)


def test_a_viewer_with_is_staff_logs_in():
    _viewer(is_staff=True)
    assert _logs_in(Client())


def test_the_documented_one_liner_is_in_the_docs_and_makes_a_user_who_logs_in():
    doc = (ROOT / "docs" / "API.md").read_text()
    start = doc.index('manage.py shell -c "')
    command = doc[start + len('manage.py shell -c "') : doc.index('"\n', start)]
    code = command.replace("\\\n  ", "")
    exec(compile(code, "docs/API.md", "exec"), {})  # what `manage.py shell -c` runs
    assert _logs_in(Client())


def test_an_api_token_needs_no_is_staff():
    token = api_tokens.issue(_viewer(is_staff=False))[1]
    assert Client().get("/feed/list.json", {"apikey": token}).status_code == 200


def test_input_post_takes_a_node_key_not_a_staff_token(redis_client):
    token = api_tokens.issue(_viewer(is_staff=True))[1]
    node, key = make_node()
    params = {"node": node.name, "fulljson": '{"t": 1}'}
    refused = Client().post("/input/post", {**params, "apikey": token})
    assert refused.status_code == 401, refused.content
    assert Client().post("/input/post", {**params, "apikey": key}).status_code == 200
