"""emoncms's site paths: /describe and /version (index.php answers them before any module) and
/user/auth.json (Modules/user/user_model.php `get_apikeys_from_login`), which must go through
the login lockout like every other password check (core/login_lockout.py)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from knox.models import AuthToken

from core.emoncms_user import EMONCMS_API_VERSION, MAX_PASSWORD_CHARS

pytestmark = pytest.mark.django_db
AUTH = "/user/auth.json"


def _auth(username: str | None, password: str | None, ip: str = "127.0.0.1", client=None):
    form = {k: v for k, v in (("username", username), ("password", password)) if v is not None}
    return (client or Client()).post(AUTH, form, REMOTE_ADDR=ip)


def _refused(response, status: int, message: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False and body["message"] == message, body


def test_describe_answers_emoncms_as_plain_text():
    response = Client().get("/describe")
    assert response.status_code == 200
    assert response.content == b"emoncms"  # index.php: $type = 'emoncms'
    assert response["Content-Type"].startswith("text/plain")
    assert response["Access-Control-Allow-Origin"] == "*"


def test_version_answers_the_emoncms_api_version_followed():
    response = Client().get("/version")
    assert response.content.decode() == EMONCMS_API_VERSION == "11.16.8"
    assert response["Content-Type"].startswith("text/plain")


def test_auth_answers_keys_that_read_as_the_users_role(viewer, engineer):
    body = _auth("viewer", "pw-viewer").json()
    assert list(body) == ["success", "userid", "apikey_write", "apikey_read"]
    assert body["success"] is True and body["userid"] == viewer.pk
    key = body["apikey_read"]
    assert Client().get(f"/feed/list.json?apikey={key}").status_code == 200
    assert Client().get(f"/input/list.json?apikey={key}").status_code == 200
    # a viewer's key reads but may not write, whichever field it came from
    write = Client().get(f"/feed/create.json?name=a&options={{}}&apikey={body['apikey_write']}")
    assert write.status_code == 403
    engineer_key = _auth("engineer", "pw-engineer").json()["apikey_write"]
    created = Client().get(
        f"/feed/create.json?name=a&options=%7B%22interval%22%3A10%7D&apikey={engineer_key}"
    )
    assert created.json()["success"] is True


@pytest.mark.parametrize(("username", "password"), [(None, "x"), ("viewer", None), ("", "")])
def test_auth_without_username_or_password_is_emoncms_s_message(viewer, username, password):
    _refused(_auth(username, password), 400, "Username or password empty")


def test_a_wrong_password_or_unknown_user_is_incorrect_authentication(viewer):
    _refused(_auth("viewer", "wrong"), 401, "Incorrect authentication")
    _refused(_auth("nobody", "pw"), 401, "Incorrect authentication")
    _refused(_auth("v" * 151, "pw"), 401, "Incorrect authentication")
    assert not AuthToken.objects.exists()


def test_a_user_with_no_staff_role_gets_no_key(db):
    from django.contrib.auth.models import User

    User.objects.create_user("visitor", password="pw-visitor")
    response = _auth("visitor", "pw-visitor")
    assert response.status_code == 403 and response.json()["success"] is False
    assert not AuthToken.objects.exists()


def test_auth_goes_through_the_login_lockout(viewer):
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        _refused(_auth("viewer", "wrong", ip="192.0.2.7"), 401, "Incorrect authentication")
    _refused(
        _auth("viewer", "wrong", ip="192.0.2.7"), 429, "Too many attempts, please try again later"
    )
    # locked: even the right password gets no key from that address
    _refused(
        _auth("viewer", "pw-viewer", ip="192.0.2.7"),
        429,
        "Too many attempts, please try again later",
    )
    assert not AuthToken.objects.exists()
    # the admin login shares the count: the same pair is locked there too
    admin = Client().post("/admin/login/", {"username": "viewer", "password": "pw-viewer"},
                          REMOTE_ADDR="192.0.2.7")  # fmt: skip
    assert admin.status_code == 429
    assert _auth("viewer", "pw-viewer", ip="192.0.2.8").json()["success"] is True


def test_a_password_at_the_bound_is_checked_and_past_it_refused_unhashed(viewer):
    _refused(_auth("viewer", "p" * MAX_PASSWORD_CHARS), 401, "Incorrect authentication")
    response = _auth("viewer", "p" * (MAX_PASSWORD_CHARS + 1))
    assert response.status_code == 400 and response.json()["field"] == "password"


def test_a_nul_in_the_username_is_a_400_never_a_database_error(viewer):
    response = _auth("vie\x00wer", "pw-viewer")
    assert response.status_code == 400 and response.json()["field"] == "username"


def test_keys_issued_by_logins_are_bounded_per_user(viewer, settings):
    settings.BMS_API_TOKENS_PER_USER = 3
    keys = [_auth("viewer", "pw-viewer").json()["apikey_read"] for _ in range(5)]
    assert AuthToken.objects.filter(user=viewer).count() == 3
    assert Client().get(f"/input/list.json?apikey={keys[-1]}").status_code == 200
    assert Client().get(f"/input/list.json?apikey={keys[0]}").status_code == 401


def test_auth_only_answers_post(viewer):
    assert Client().get(AUTH, {"username": "viewer", "password": "pw-viewer"}).status_code == 405
