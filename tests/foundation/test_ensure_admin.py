"""scripts/run-site.sh's admin step (manage.py ensure_admin): a second start keeps the
password hash, so an admin's session survives a restart of the site."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

pytestmark = pytest.mark.django_db


def _ensure(monkeypatch, password: str, *args: str) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", password)
    call_command("ensure_admin", *args, verbosity=0)


def test_second_start_keeps_the_password_hash_and_the_session(monkeypatch):
    _ensure(monkeypatch, "first-pw", "--reset")
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff and admin.check_password("first-pw")
    browser = Client()
    assert browser.login(username="admin", password="first-pw")
    hash_before = admin.password

    _ensure(monkeypatch, "first-pw")  # the next start of run-site.sh
    _ensure(monkeypatch, "first-pw")

    assert User.objects.get(username="admin").password == hash_before
    response = browser.get("/staff/")
    assert response.status_code == 200  # still logged in, not sent to the login page


def test_a_new_password_file_resets_the_password(monkeypatch):
    _ensure(monkeypatch, "first-pw")
    browser = Client()
    assert browser.login(username="admin", password="first-pw")
    _ensure(monkeypatch, "second-pw", "--reset")
    assert User.objects.get(username="admin").check_password("second-pw")
    # What every start used to do: the old session is no longer valid.
    assert browser.get("/staff/").status_code == 302


def test_an_existing_admin_is_not_given_the_file_password(monkeypatch):
    User.objects.create_superuser("admin", "a@example.org", "chosen-by-hand")
    _ensure(monkeypatch, "from-the-file")
    assert User.objects.get(username="admin").check_password("chosen-by-hand")


@pytest.mark.parametrize("password", ["", "x" * 257])
def test_password_is_bounded(monkeypatch, password):
    with pytest.raises(CommandError, match="DJANGO_SUPERUSER_PASSWORD"):
        _ensure(monkeypatch, password)
    assert not User.objects.filter(username="admin").exists()
