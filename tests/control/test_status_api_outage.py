"""GET /api/v1/control/status while the database is down: a 503 in the API's JSON error shape
saying the database is unavailable (issue #27 item 9; it was a 500 page)."""

from __future__ import annotations

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.sqlite_away import database_away

pytestmark = pytest.mark.django_db(transaction=True)

STATUS = "/api/v1/control/status"


def _assert_database_unavailable(response) -> None:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert "database" in body["error"].lower() and "unavailable" in body["error"]
    assert response["Retry-After"]


def test_the_status_api_is_a_503_while_the_database_is_down(viewer_api, redis_client):
    assert viewer_api.get(STATUS).status_code == 200
    with database_away():
        _assert_database_unavailable(viewer_api.get(STATUS))
    assert viewer_api.get(STATUS).status_code == 200  # and answers again once it is back


def test_a_token_that_cannot_be_looked_up_is_a_503_not_a_401(viewer, redis_client):
    """The token's lookup is the first query: it fails as the database, not as the caller."""
    _, token = AuthToken.objects.create(viewer)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get(STATUS).status_code == 200
    with database_away():
        _assert_database_unavailable(client.get(STATUS))
