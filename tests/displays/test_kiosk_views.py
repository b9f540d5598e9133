"""The kiosk pages and data.json over HTTP: public access, private feeds, bad input."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from displays.models import Display, Panel
from feeds.store import service

pytestmark = pytest.mark.django_db


@pytest.fixture
def client() -> Client:
    return Client()


@pytest.fixture
def staff_client(viewer) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


def test_kiosk_page_is_public_and_lays_out_every_panel(client, demo_displays):
    response = client.get("/kiosk/pv/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Solar PV" in html
    assert html.count('class="panel kind-') == 6
    assert "/static/vendor/chart.js/chart.umd.js" in html
    assert "/static/displays/kiosk.js" in html
    config = json.loads(html.split('id="kiosk-config" type="application/json">')[1].split("<")[0])
    assert config["dataUrl"] == "/kiosk/pv/data.json"
    assert config["refreshMs"] == demo_displays["pv"].refresh_s * 1000
    assert config["timeZone"] == "Europe/London"


def test_chart_js_is_served_from_our_static_files(client):
    response = client.get("/static/vendor/chart.js/chart.umd.js")

    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"Chart.js v4." in body[:200]


def test_data_json_holds_live_values_of_public_feeds(client, demo_displays, role_feeds):
    service.log_points([(role_feeds["pv_power"].id, 1_790_000_000, 2345.0)])

    response = client.get("/kiosk/pv/data.json")

    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    data = response.json()
    assert data["display"]["slug"] == "pv"
    live = next(p for p in data["panels"] if p["kind"] == "live_value")
    assert live["value"] == 2345.0
    assert live["t"] == 1_790_000_000_000
    assert live["unit"] == "W"


def test_unknown_slug_is_404_for_page_and_data(client, demo_displays):
    assert client.get("/kiosk/nope/").status_code == 404
    response = client.get("/kiosk/nope/data.json")
    assert response.status_code == 404
    assert response.json()["error"] == "No display 'nope'."


def test_private_display_is_hidden_from_visitors_but_shown_to_staff(
    client, staff_client, demo_displays
):
    Display.objects.filter(slug="hydro").update(public=False)

    assert client.get("/kiosk/hydro/").status_code == 404
    assert client.get("/kiosk/hydro/data.json").status_code == 404
    assert staff_client.get("/kiosk/hydro/").status_code == 200
    assert staff_client.get("/kiosk/hydro/data.json").status_code == 200
    assert "/kiosk/hydro/" not in client.get("/kiosk/").content.decode()
    assert "/kiosk/pv/" in client.get("/kiosk/").content.decode()


def test_private_feed_on_a_public_display_is_not_exposed(
    client, staff_client, site, make_feed, redis_client
):
    secret = make_feed("boardroom occupancy", "W", public=False)
    shown = make_feed("pv", "W", public=True)
    service.log_points([(secret.id, 1_790_000_000, 987.25), (shown.id, 1_790_000_000, 1234.5)])
    display = Display.objects.create(site=site, slug="lobby", title="Lobby")
    for order, feed in enumerate([secret, shown]):
        panel = Panel.objects.create(display=display, kind="live_value", label=f"p{order}",
                                     order=order)  # fmt: skip
        panel.feeds.add(feed)
    chart = Panel.objects.create(display=display, kind="chart_24h", label="both", order=2)
    chart.feeds.set([secret, shown])

    body = client.get("/kiosk/lobby/data.json").content.decode()
    page = client.get("/kiosk/lobby/").content.decode()

    data = json.loads(body)
    hidden, visible, both = data["panels"]
    assert hidden["error"] == "Feed not public"
    assert "value" not in hidden
    assert visible["value"] == 1234.5
    assert [s["feed"] for s in both["series"]] == [shown.id]
    for text in (body, page):
        assert "987.25" not in text and "boardroom" not in text
        assert f'"feed": {secret.id}' not in text and f'"feed":{secret.id}' not in text
    staff = staff_client.get("/kiosk/lobby/data.json").json()
    assert staff["panels"][0]["value"] == 987.25


def test_refresh_override_is_checked(client, demo_displays):
    page = client.get("/kiosk/pv/?refresh=0.05").content.decode()
    assert '"refreshMs": 50' in page
    for bad in ("0", "fast", "nan", "99999"):
        response = client.get(f"/kiosk/pv/?refresh={bad}")
        assert response.status_code == 400
        assert response.content.decode().startswith("refresh:")


def test_rotation_page_frames_each_display_in_order(client, demo_displays):
    response = client.get("/kiosk/?rotate=thermal,pv,hydro&refresh=2&every=7")

    assert response.status_code == 200
    html = response.content.decode()
    assert (
        html.index("/kiosk/thermal/?refresh=2")
        < html.index("/kiosk/pv/")
        < html.index("/kiosk/hydro/")
    )
    assert 'data-seconds="7.0"' in html
    # The frames are same-origin: the kiosk page must allow that (and only that).
    assert client.get("/kiosk/pv/")["X-Frame-Options"] == "SAMEORIGIN"


def test_rotation_refuses_unknown_or_empty_lists(client, demo_displays):
    assert client.get("/kiosk/?rotate=pv,nope").status_code == 404
    empty = client.get("/kiosk/?rotate=,")
    assert empty.status_code == 400
    assert empty.content.decode().startswith("rotate:")
    assert client.get("/kiosk/?rotate=pv&every=0").status_code == 400


def test_kiosk_is_read_only(client, demo_displays):
    assert client.post("/kiosk/pv/data.json").status_code == 405
    assert client.post("/kiosk/pv/").status_code == 405


def test_bad_panel_options_are_refused_naming_the_key(demo_displays):
    panel = Panel(display=demo_displays["pv"], kind="co2_saved", label="CO₂",
                  options={"grid_intensity_g_per_kwh": "lots", "period": "forever"})  # fmt: skip

    with pytest.raises(ValidationError) as caught:
        panel.full_clean()

    messages = caught.value.message_dict["options"]
    assert any("grid_intensity_g_per_kwh" in m for m in messages)
    assert any("period" in m for m in messages)


def test_bad_panel_options_through_the_api_get_a_400(engineer_api, demo_displays):
    response = engineer_api.post(
        "/api/v1/panels",
        {"display": demo_displays["pv"].id, "kind": "chart_24h", "label": "x",
         "options": {"interval": 5}},
        format="json",
    )  # fmt: skip

    assert response.status_code == 400
    assert "options.interval" in json.dumps(response.json())


def test_panel_with_bad_stored_options_shows_an_error_not_a_500(client, demo_displays):
    Panel.objects.filter(display__slug="pv", kind="co2_saved").update(options={"period": "forever"})

    response = client.get("/kiosk/pv/data.json")

    assert response.status_code == 200
    co2 = next(p for p in response.json()["panels"] if p["kind"] == "co2_saved")
    assert "options.period" in co2["error"]
