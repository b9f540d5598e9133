"""A public display built on feeds that are not public is saved with a clear warning:
without a login its panels show "Feed not public", which nobody expected when saving it."""

from __future__ import annotations

import pytest
from django.test import Client

from displays.models import Display, Panel
from feeds.models import Feed

pytestmark = pytest.mark.django_db


@pytest.fixture
def feeds(db) -> dict[str, Feed]:
    return {
        "private": Feed.objects.create(tag="meter", name="Office power", unit="W", public=False),
        "public": Feed.objects.create(tag="pv", name="PV power", unit="W", public=True),
    }


def _display(api, public: bool) -> dict:
    body = {"slug": "foyer", "title": "Foyer", "theme": "dark", "public": public}
    response = api.post("/api/v1/displays", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _panel(api, display_id: int, feed: Feed):
    body = {"display": display_id, "kind": "live_value", "label": "Power now", "feeds": [feed.id]}
    return api.post("/api/v1/panels", body, format="json")


def test_the_api_warns_on_a_private_feed_in_a_public_display(engineer_api, feeds):
    display = _display(engineer_api, public=True)
    assert display["warnings"] == []
    response = _panel(engineer_api, display["id"], feeds["private"])
    assert response.status_code == 201  # saved anyway: the feed may be made public next
    [warning] = response.json()["warnings"]
    assert "Panel 'Power now' of public display 'foyer'" in warning
    assert f"meter:Office power (id {feeds['private'].id})" in warning
    assert "Feed not public" in warning
    shown = engineer_api.get(f"/api/v1/displays/{display['id']}").json()
    assert shown["warnings"] == [warning]


def test_no_warning_for_public_feeds_or_a_private_display(engineer_api, feeds):
    public = _display(engineer_api, public=True)
    assert _panel(engineer_api, public["id"], feeds["public"]).json()["warnings"] == []
    Display.objects.filter(pk=public["id"]).update(slug="old")
    private = _display(engineer_api, public=False)
    assert _panel(engineer_api, private["id"], feeds["private"]).json()["warnings"] == []
    # Making the private display public says so in the PATCH answer.
    response = engineer_api.patch(
        f"/api/v1/displays/{private['id']}", {"public": True}, format="json"
    )
    assert len(response.json()["warnings"]) == 1


def test_the_admin_warns_when_a_panel_is_saved(superuser, feeds):
    display = Display.objects.create(slug="foyer", title="Foyer", public=True)
    client = Client()
    client.force_login(superuser)
    response = client.post(
        "/admin/displays/panel/add/",
        {
            "display": display.id,
            "kind": "live_value",
            "label": "Power now",
            "unit": "",
            "colour": "#f0a000",
            "order": 0,
            "options": "{}",
            "feeds": [feeds["private"].id],
        },
        follow=True,
    )
    assert Panel.objects.filter(display=display).count() == 1, [
        line for line in response.content.decode().splitlines() if "error" in line.lower()
    ][:12]
    texts = [str(m) for m in response.context["messages"]]
    assert any("uses feeds that are not public: meter:Office power" in t for t in texts), texts


def test_making_a_feed_private_that_a_public_display_shows_warns_in_api_and_admin(
    engineer_api, superuser, feeds
):
    """The outside tester unticked "public" on the hydro feed of the public hydro kiosk: saved
    with no word, and the kiosk silently said "Feed not public"."""
    display = _display(engineer_api, public=True)
    assert _panel(engineer_api, display["id"], feeds["public"]).status_code == 201
    shown = feeds["public"]
    response = engineer_api.patch(f"/api/v1/feeds/{shown.id}", {"public": False}, format="json")
    assert response.status_code == 200  # saved: the warning informs, it does not refuse
    [warning] = response.json()["warnings"]
    assert "public display(s) 'foyer' show it" in warning and "Feed not public" in warning
    back = engineer_api.patch(f"/api/v1/feeds/{shown.id}", {"public": True}, format="json")
    assert back.json()["warnings"] == []

    client = Client()
    client.force_login(superuser)
    response = client.post(
        f"/admin/feeds/feed/{shown.id}/change/",
        {"name": shown.name, "tag": shown.tag, "unit": shown.unit, "description": ""},
        follow=True,  # "public" unticked
    )
    texts = [str(m) for m in response.context["messages"]]
    assert any("public display(s) 'foyer' show it" in t for t in texts), texts
