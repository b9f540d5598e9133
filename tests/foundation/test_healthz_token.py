"""/healthz with a staff API token gets the deep answer a logged-in engineer gets; a token of
no staff role, a wrong token and no token get the public one (or a 401 for the wrong one)."""

import pytest
from django.contrib.auth.models import User
from knox.models import AuthToken

from bms import health


@pytest.fixture(autouse=True)
def _no_cached_result():
    health.forget()
    yield
    health.forget()


def _get(client, token):
    # From a proxied address: the loopback monitor's own deep answer must not count here.
    return client.get(
        "/healthz", HTTP_AUTHORIZATION=f"Token {token}", HTTP_X_FORWARDED_FOR="203.0.113.9"
    )


def _is_deep(body: dict) -> bool:
    return any(set(check) - {"ok"} for check in body["checks"].values())


@pytest.mark.django_db
def test_an_engineers_token_gets_the_deep_answer(client, engineer, redis_client):
    _, token = AuthToken.objects.create(user=engineer)
    body = _get(client, token).json()
    assert _is_deep(body)
    assert "engine" in body["checks"]["database"]


@pytest.mark.django_db
def test_a_token_of_a_user_without_a_staff_role_gets_the_public_answer(client, redis_client):
    nobody = User.objects.create_user("nobody", password="pw-nobody")
    _, token = AuthToken.objects.create(user=nobody)
    body = _get(client, token).json()
    assert not _is_deep(body)


@pytest.mark.django_db
def test_a_wrong_token_is_a_401_naming_the_header(client, redis_client):
    response = _get(client, "0" * 64)
    assert response.status_code == 401
    assert response.json()["field"] == "Authorization"


@pytest.mark.django_db
def test_no_token_gets_the_public_answer(client, redis_client):
    body = client.get("/healthz", HTTP_X_FORWARDED_FOR="203.0.113.9").json()
    assert not _is_deep(body)
