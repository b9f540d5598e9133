"""Login lockout per address, whatever the username (second red-team round, #25): a client
cycling random usernames never met the per-username limit and each try cost a password hash.
After BMS_LOGIN_IP_FAILURE_LIMIT (30) wrong logins from one address, the next ones from that
address get 429 without a password check, on the admin login and on /user/auth.json; the
same user from another address still logs in, and the per-username lockout still holds.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db
LOGIN = "/admin/login/"
AUTH = "/user/auth.json"
ATTACKER = "192.0.2.66"
OFFICE = "192.0.2.10"
IP_LIMIT = 30


def _admin(username: str, password: str, ip: str, client: Client | None = None):
    form = {"username": username, "password": password, "next": "/staff/"}
    return (client or Client()).post(LOGIN, form, REMOTE_ADDR=ip)


def _emoncms(username: str, password: str, ip: str):
    return Client().post(AUTH, {"username": username, "password": password}, REMOTE_ADDR=ip)


@pytest.fixture
def password_checks(monkeypatch) -> Counter:
    """Counts the calls of the backend that hashes the password (the real one still runs)."""
    calls: Counter = Counter()
    real = ModelBackend.authenticate

    def counted(self, request, *args, **kwargs):
        calls["hash"] += 1
        return real(self, request, *args, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", counted)
    return calls


def test_the_default_is_thirty_failures_per_address():
    assert settings.BMS_LOGIN_IP_FAILURE_LIMIT == IP_LIMIT
    # the per-username-and-address lockout is kept, with its own lower limit
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AXES_FAILURE_LIMIT < IP_LIMIT


@pytest.mark.parametrize("path", ["admin", "emoncms"])
def test_cycling_usernames_is_locked_out_by_address(viewer, password_checks, path):
    attempt = _admin if path == "admin" else _emoncms
    tried = 200 if path == "admin" else 401  # the form with its error / emoncms's refusal
    for i in range(IP_LIMIT):
        assert attempt(f"nobody-{i}", "x", ATTACKER).status_code == tried, i
    assert password_checks["hash"] == IP_LIMIT
    # the bound reached: refused whatever the name, even a real user's right password,
    # and no password is checked any more
    for name, password in (("nobody-new", "x"), ("viewer", "pw-viewer")):
        refused = attempt(name, password, ATTACKER)
        assert refused.status_code == 429, refused.content
    assert password_checks["hash"] == IP_LIMIT
    if path == "emoncms":
        body = refused.json()
        assert body["success"] is False and body["field"] == "username"
    # refused attempts are still recorded (axes' default): an address that keeps trying
    # keeps itself locked out
    assert AccessAttempt.objects.filter(ip_address=ATTACKER).count() == IP_LIMIT + 2
    # the other side: the same user from another address logs in
    office = Client()
    assert _admin("viewer", "pw-viewer", OFFICE, office).status_code == 302
    assert "_auth_user_id" in office.session
    assert _emoncms("viewer", "pw-viewer", OFFICE).json()["success"] is True


def test_one_below_the_bound_a_right_password_still_logs_in(viewer):
    for i in range(IP_LIMIT - 1):
        _admin(f"nobody-{i}", "x", ATTACKER)
    client = Client()
    assert _admin("viewer", "pw-viewer", ATTACKER, client).status_code == 302
    assert "_auth_user_id" in client.session


def test_the_address_is_let_in_again_after_the_cool_off(viewer):
    for i in range(IP_LIMIT):
        _admin(f"nobody-{i}", "x", ATTACKER)
    assert _admin("viewer", "pw-viewer", ATTACKER).status_code == 429
    # the cool-off passes (moved in the database, not slept)
    old = timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(minutes=1)
    AccessAttempt.objects.update(attempt_time=old)
    assert _admin("viewer", "pw-viewer", ATTACKER).status_code == 302


def test_the_per_username_lockout_still_holds_below_the_address_bound(viewer):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _admin("viewer", "wrong", ATTACKER)
    assert _admin("viewer", "pw-viewer", ATTACKER).status_code == 429
