"""Smaller security holes: who counts as staff on the kiosk (11), the alarm page's `next=`
(14), an empty SECRET_KEY (14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from core.roles import VIEWERS
from tests.security.conftest import HIDDEN, World

ROOT = Path(__file__).resolve().parents[2]


# --- kiosk private pages: role groups, not Django's is_staff flag (finding 11) --------------


def _role_less(name: str = "former", **flags) -> User:
    """A person whose role was taken away: still is_staff, in no role group."""
    return User.objects.create_user(name, password="pw", is_staff=True, **flags)


def _client(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def private_value_on_public_display(world: World):
    """The public display 'pv' with a panel showing the private feed, which has a value."""
    from displays.models import Display, Panel
    from feeds.store import service

    display = Display.objects.get(slug=world.slugs["public"])
    panel = Panel.objects.create(display=display, kind="live_value", label="power")
    panel.feeds.add(world.ids["private_feed"])
    service.log_points([(world.ids["private_feed"], 1_700_000_000, 987.25)])
    return display


def _private_value_shown(client: Client, slug: str) -> bool:
    panels = client.get(f"/kiosk/{slug}/data.json").json()["panels"]
    return any(p.get("value") == 987.25 for p in panels)


def _reads_private(client: Client, world: World) -> dict[str, bool]:
    slug = world.slugs["private_display"]
    return {
        "page": client.get(f"/kiosk/{slug}/").status_code == 200,
        "data": client.get(f"/kiosk/{slug}/data.json").status_code == 200,
        "index": slug in client.get("/kiosk/").content.decode(),
        "value": _private_value_shown(client, world.slugs["public"]),
    }


def test_a_user_whose_role_was_removed_reads_no_private_display(
    world, private_value_on_public_display
):
    viewer = User.objects.get(username="viewer")
    client = _client(viewer)
    assert _reads_private(client, world) == dict.fromkeys(("page", "data", "index", "value"), True)
    viewer.groups.clear()  # the role is taken away; is_staff stays set
    client = _client(User.objects.get(pk=viewer.pk))
    assert _reads_private(client, world) == dict.fromkeys(("page", "data", "index", "value"), False)
    assert HIDDEN not in client.get("/kiosk/").content.decode()


@pytest.mark.parametrize(
    ("make_user", "allowed"),
    [
        (lambda: None, False),
        (lambda: _role_less(), False),
        (lambda: User.objects.create_user("nobody", password="pw"), False),
        (lambda: _in_role_without_is_staff(), True),
        (lambda: User.objects.get(username="root"), True),
        (lambda: User.objects.get(username="booker"), True),
        (lambda: User.objects.get(username="engineer"), True),
    ],
    ids=["anonymous", "is_staff-no-role", "plain-user", "role-no-is_staff", "super",
         "booker", "engineer"],
)  # fmt: skip
def test_kiosk_private_reads_from_both_sides(
    world, private_value_on_public_display, make_user, allowed
):
    reads = _reads_private(_client(make_user()), world)
    assert reads == dict.fromkeys(reads, allowed)


def _in_role_without_is_staff() -> User:
    user = User.objects.create_user("plain-viewer", password="pw", is_staff=False)
    user.groups.add(Group.objects.get(name=VIEWERS))
    return user


def test_private_feed_values_through_the_feed_api_follow_the_same_rule(world):
    url = "/feed/timevalue.json"
    params = {"id": world.ids["private_feed"]}
    assert _client(_role_less()).get(url, params).status_code in (401, 403, 404)
    assert _client(User.objects.get(username="viewer")).get(url, params).status_code == 200


# --- alarm acknowledge: no open redirect through next= (finding 14) --------------------------


@pytest.mark.parametrize(
    ("next_url", "expected"),
    [
        ("https://evil.example/phish", "/staff/alarms/"),
        ("//evil.example/phish", "/staff/alarms/"),
        ("/\\evil.example", "/staff/alarms/"),
        ("javascript:alert(1)", "/staff/alarms/"),
        ("http://testserver.evil.example/", "/staff/alarms/"),
        ("", "/staff/alarms/"),
        ("/staff/", "/staff/"),
        ("/staff/alarms/?severity=critical", "/staff/alarms/?severity=critical"),
    ],
)
def test_acknowledge_redirects_only_within_the_site(world, next_url, expected):
    client = _client(User.objects.get(username="engineer"))
    response = client.post(f"/staff/alarms/{world.ids['alarm']}/acknowledge", {"next": next_url})
    assert response.status_code == 302
    assert response["Location"] == expected


# --- an empty SECRET_KEY refuses to start (finding 14) ---------------------------------------


def _manage_check(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**clean, "DJANGO_SETTINGS_MODULE": "bms.settings", "BMS_DATA_DIR": str(tmp_path),
             **env},
    )  # fmt: skip


@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_secret_key_stops_start_up(tmp_path, empty):
    result = _manage_check(tmp_path, SECRET_KEY=empty)
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is empty" in result.stderr


def test_a_set_secret_key_or_debug_starts(tmp_path):
    assert _manage_check(tmp_path, SECRET_KEY="a-real-secret-" + "x" * 40).returncode == 0
    debug = _manage_check(tmp_path, SECRET_KEY="", DEBUG="true")
    assert debug.returncode == 0, debug.stderr
