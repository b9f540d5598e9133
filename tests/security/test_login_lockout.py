"""Login lockout: 300 wrong passwords were all tried.

django-axes counts failures per username and client IP: after BMS_LOGIN_FAILURE_LIMIT (5)
the pair gets 429 for BMS_LOGIN_COOLOFF_MINUTES (15), even with the right password. Real POSTs
to the admin login page, which is also the staff pages' login (LOGIN_URL).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.utils import timezone

LOGIN = "/admin/login/"
LIMIT = 5


def _login(client: Client, username: str, password: str, ip: str = "127.0.0.1", **meta):
    return client.post(
        LOGIN,
        {"username": username, "password": password, "next": "/staff/"},
        REMOTE_ADDR=ip,
        **meta,
    )


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_defaults_are_five_failures_and_fifteen_minutes():
    assert settings.AXES_FAILURE_LIMIT == LIMIT
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_after_five_wrong_passwords_even_the_right_one_is_refused(viewer):
    client = Client()
    for _ in range(LIMIT - 1):
        assert _login(client, "viewer", "wrong").status_code == 200  # the form, with its error
    # the fifth failure locks: it is answered 429 already
    assert _login(client, "viewer", "wrong").status_code == 429
    response = _login(client, "viewer", "pw-viewer")
    assert response.status_code == 429
    assert not _logged_in(client)
    # the staff pages' login is the same page: no way round through /staff/
    assert Client().get("/staff/").status_code == 302


def test_the_lockout_is_per_username_and_ip(viewer, engineer):
    for _ in range(LIMIT):
        _login(Client(), "viewer", "wrong", ip="192.0.2.10")
    assert _login(Client(), "viewer", "pw-viewer", ip="192.0.2.10").status_code == 429
    other_ip = Client()
    assert _login(other_ip, "viewer", "pw-viewer", ip="192.0.2.11").status_code == 302
    assert _logged_in(other_ip)
    other_user = Client()
    assert _login(other_user, "engineer", "pw-engineer", ip="192.0.2.10").status_code == 302
    assert _logged_in(other_user)


def test_after_the_cool_off_the_right_password_works_again(viewer):
    for _ in range(LIMIT):
        _login(Client(), "viewer", "wrong")
    assert _login(Client(), "viewer", "pw-viewer").status_code == 429
    # 15 minutes pass (moved in the database, not slept)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    client = Client()
    assert _login(client, "viewer", "pw-viewer").status_code == 302
    assert _logged_in(client)


def test_a_right_password_resets_the_count(viewer):
    """Staff who mistype now and then are never locked out by mistakes days apart."""
    for _ in range(3):
        for _ in range(LIMIT - 1):
            assert _login(Client(), "viewer", "wrong").status_code == 200
        assert _login(Client(), "viewer", "pw-viewer").status_code == 302


def test_spoofed_forwarded_for_does_not_escape_the_lockout_without_trusted_proxies(viewer):
    """With BMS_TRUSTED_PROXIES=0 (the default) X-Forwarded-For is the caller's own text."""
    assert settings.BMS_TRUSTED_PROXIES == 0
    for i in range(LIMIT):
        _login(Client(), "viewer", "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}")
    response = _login(Client(), "viewer", "pw-viewer", HTTP_X_FORWARDED_FOR="198.51.100.99")
    assert response.status_code == 429


def test_behind_a_trusted_proxy_each_client_ip_is_counted_apart(viewer, settings):
    settings.BMS_TRUSTED_PROXIES = 1
    proxy = "10.0.0.1"
    for _ in range(LIMIT):
        _login(Client(), "viewer", "wrong", ip=proxy, HTTP_X_FORWARDED_FOR="203.0.113.5")
    locked = _login(Client(), "viewer", "pw-viewer", ip=proxy, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert locked.status_code == 429
    # another client behind the same proxy is not locked out by the first one's guesses;
    # a forged left-most entry does not help the locked-out client either
    ok = _login(Client(), "viewer", "pw-viewer", ip=proxy, HTTP_X_FORWARDED_FOR="203.0.113.6")
    assert ok.status_code == 302
    forged = "203.0.113.77, 203.0.113.5"
    again = _login(Client(), "viewer", "pw-viewer", ip=proxy, HTTP_X_FORWARDED_FOR=forged)
    assert again.status_code == 429


@pytest.mark.parametrize("username", ["nobody-by-this-name", "x" * 300])
def test_unknown_and_overlong_usernames_are_counted_too(db, username):
    """A 300-character name was a 500 on PostgreSQL (the lockout log holds 255)."""
    for _ in range(LIMIT - 1):
        assert _login(Client(), username, "wrong").status_code == 200
    assert _login(Client(), username, "wrong").status_code == 429


@pytest.mark.parametrize("forwarded", ["not-an-ip", "", "999.1.1.1", "::1%eth0" * 40])
def test_a_forwarded_for_that_is_no_address_falls_back_to_the_peer(viewer, settings, forwarded):
    """A broken proxy chain must not make a login a 500 (the log stores an IP address)."""
    settings.BMS_TRUSTED_PROXIES = 1
    for _ in range(LIMIT):
        response = _login(Client(), "viewer", "wrong", HTTP_X_FORWARDED_FOR=forwarded)
    assert response.status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"127.0.0.1"}


def test_test_client_login_and_management_commands_are_not_counted(viewer):
    """Client.login() and scripts call authenticate() without a request: nothing to count."""
    client = Client()
    assert client.login(username="viewer", password="pw-viewer")
    assert not AccessAttempt.objects.exists()
