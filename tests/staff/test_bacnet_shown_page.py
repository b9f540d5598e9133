"""The staff BACnet page's "Shown to the BACnet network" section (staff/bacnet_shown.py): every
role sees each zone's write switches and the feeds shown; engineers switch them, checked as the
API checks them (the 201st feed refused naming bacnet_export) and audited in the change history
as the API and the admin audit them; a viewer's or booker's hand-made POST is refused. The
feeds are bounded: only those shown are listed, and a search lists at most FEED_MATCHES."""

from __future__ import annotations

from html import unescape

import pytest
from django.test import Client

from control.models import ProgrammeChange, Zone
from feeds.models import MAX_BACNET_FEEDS, Feed
from staff import bacnet_shown
from staff.bacnet_shown import FEED_MATCHES, MAX_SEARCH, STAFF_REASON
from tests.control import factories as f

PAGE = "/staff/bacnet/"


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _section(html: str) -> str:
    """The section, its text unescaped (quotes in a message are &#x27; in the page)."""
    start = html.index('id="shown"')
    return unescape(html[start : html.index("</section>", start)])


def _zone_row(html: str, zone: Zone) -> str:
    start = html.index(f'id="shown-zone-{zone.pk}"')
    return html[start : html.index("</tr>", start)]


@pytest.fixture
def hall(db) -> Zone:
    return f.zone("Hall")


@pytest.fixture
def boiler(db) -> Feed:
    return Feed.objects.create(name="Boiler power", tag="plant", unit="kW")


# Who may switch.


@pytest.mark.parametrize("role", ["viewer", "booker"])
def test_a_viewer_or_booker_sees_the_state_without_switches_and_a_hand_made_post_is_refused(
    role, request, hall, boiler
):
    Feed.objects.create(name="Flow", tag="plant", unit="°C", bacnet_export=True)
    client = _login(request.getfixturevalue(role))
    section = _section(client.get(PAGE).content.decode())
    assert "Read only: engineers switch these." in section
    row = _zone_row(section, hall)
    assert row.count('state">off</span>') == 2  # setpoint and occupancy writes, both off
    assert "Switch on" not in section and "Stop showing" not in section
    assert "plant:Flow" in section  # the feeds shown, listed for them too
    searched = _section(client.get(PAGE, {"feed": "Boiler"}).content.decode())
    assert "plant:Boiler power" in searched and "Show on BACnet" not in searched

    zone_post = client.post(
        f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "setpoint", "to": "on"}
    )
    feed_post = client.post(f"/staff/bacnet/feeds/{boiler.pk}/export", {"to": "on"})
    assert (zone_post.status_code, feed_post.status_code) == (403, 403)
    hall.refresh_from_db()
    boiler.refresh_from_db()
    assert not hall.bacnet_setpoint_writable and not boiler.bacnet_export
    assert not ProgrammeChange.objects.exists()


def test_an_engineer_switches_a_zones_setpoint_writes_on_audited_as_from_this_page(engineer, hall):
    client = _login(engineer)
    assert 'aria-label="Switch Hall setpoint writes on"' in _section(
        client.get(PAGE).content.decode()
    )
    done = client.post(f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "setpoint", "to": "on"})
    assert done.status_code == 302 and done["Location"] == f"{PAGE}#shown"
    hall.refresh_from_db()
    assert hall.bacnet_setpoint_writable and not hall.bacnet_occupancy_writable
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject) == (engineer.username, "zone 'Hall'")
    assert change.change == "BACnet setpoint writes accepted no → yes"
    assert change.reason == STAFF_REASON

    page = client.get(PAGE).content.decode()
    row = _zone_row(_section(page), hall)
    assert row.index('state">on</span>') < row.index("Switch off") < row.index('state">off</span>')
    assert "BACnet setpoint writes accepted no → yes" in _section(page)  # its recent changes
    # Sent again (a second tab, a double click): nothing changed, nothing recorded.
    client.post(f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "setpoint", "to": "on"})
    assert ProgrammeChange.objects.count() == 1

    client.post(f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "occupancy", "to": "on"})
    client.post(f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "setpoint", "to": "off"})
    hall.refresh_from_db()
    assert hall.bacnet_occupancy_writable and not hall.bacnet_setpoint_writable
    assert [c.change for c in ProgrammeChange.objects.all()[:2]] == [
        "BACnet setpoint writes accepted yes → no",
        "BACnet occupancy writes accepted no → yes",
    ]


@pytest.mark.parametrize(
    ("sent", "field"),
    [
        ({"setting": "temperature", "to": "on"}, "setting: 'temperature' is neither"),
        ({"setting": "", "to": "on"}, "setting: '' is neither"),
        ({"setting": "setpoint", "to": "perhaps"}, "to: 'perhaps' is neither 'on' nor 'off'"),
        ({"setting": "setpoint"}, "to: '' is neither"),
    ],
)
def test_a_bad_zone_switch_is_a_400_naming_the_field_and_changes_nothing(
    engineer, hall, sent, field
):
    refused = _login(engineer).post(f"/staff/bacnet/zones/{hall.pk}/writes", sent)
    assert refused.status_code == 400
    assert f"Hall: {field}" in _section(refused.content.decode())
    hall.refresh_from_db()
    assert not hall.bacnet_setpoint_writable and not ProgrammeChange.objects.exists()


def test_a_switch_of_a_zone_or_feed_that_does_not_exist_is_a_404(engineer):
    client = _login(engineer)
    assert (
        client.post(
            "/staff/bacnet/zones/999/writes", {"setting": "setpoint", "to": "on"}
        ).status_code
        == 404
    )
    assert client.post("/staff/bacnet/feeds/999/export", {"to": "on"}).status_code == 404


def test_a_get_of_a_switch_is_refused(engineer, hall):
    assert _login(engineer).get(f"/staff/bacnet/zones/{hall.pk}/writes").status_code == 405


# Feeds: bounded and audited.


def test_an_engineer_shows_a_feed_found_by_name_and_takes_it_off_audited(engineer, boiler):
    client = _login(engineer)
    found = _section(client.get(PAGE, {"feed": "boiler"}).content.decode())
    assert f'id="feed-match-{boiler.pk}"' in found and "Show on BACnet" in found
    done = client.post(
        f"/staff/bacnet/feeds/{boiler.pk}/export", {"to": "on", "feed_search": "boiler"}
    )
    assert done.status_code == 302 and done["Location"] == f"{PAGE}?feed=boiler#shown"
    boiler.refresh_from_db()
    assert boiler.bacnet_export
    page = _section(client.get(PAGE, {"feed": "boiler"}).content.decode())
    assert (
        f'id="shown-feed-{boiler.pk}"' in page and f"analog-input,{1_000_000 + boiler.pk}" in page
    )
    assert f'id="feed-match-{boiler.pk}"' not in page  # shown already: not offered again
    client.post(f"/staff/bacnet/feeds/{boiler.pk}/export", {"to": "off"})
    boiler.refresh_from_db()
    assert not boiler.bacnet_export
    assert [(c.subject, c.change, c.reason) for c in ProgrammeChange.objects.all()] == [
        ("feed 'plant:Boiler power'", "Shown on BACnet yes → no", STAFF_REASON),
        ("feed 'plant:Boiler power'", "Shown on BACnet no → yes", STAFF_REASON),
    ]


def test_the_201st_feed_is_refused_naming_bacnet_export(engineer):
    Feed.objects.bulk_create(
        Feed(name=f"Feed {n}", bacnet_export=True) for n in range(MAX_BACNET_FEEDS - 1)
    )
    last, past = Feed.objects.create(name="Last"), Feed.objects.create(name="Past")
    client = _login(engineer)
    assert client.post(f"/staff/bacnet/feeds/{last.pk}/export", {"to": "on"}).status_code == 302
    refused = client.post(f"/staff/bacnet/feeds/{past.pk}/export", {"to": "on"})
    assert refused.status_code == 400
    assert "Past: bacnet_export: At most 200 feeds are shown on BACnet" in _section(
        refused.content.decode()
    )
    past.refresh_from_db()
    assert not past.bacnet_export
    assert Feed.objects.filter(bacnet_export=True).count() == MAX_BACNET_FEEDS
    assert ProgrammeChange.objects.count() == 1  # the 200th only
    bad = client.post(f"/staff/bacnet/feeds/{past.pk}/export", {"to": "yes"})
    assert bad.status_code == 400 and "Past: to: 'yes' is neither" in _section(bad.content.decode())


def test_only_the_feeds_shown_are_listed_and_a_search_at_most_its_bound(viewer):
    Feed.objects.bulk_create(
        Feed(name=f"Meter {n:03}", tag="site", unit="kWh") for n in range(FEED_MATCHES + 5)
    )
    Feed.objects.create(name="Meter shown", tag="site", bacnet_export=True)
    client = _login(viewer)
    page = _section(client.get(PAGE).content.decode())
    assert page.count('id="shown-feed-') == 1 and 'id="feed-match-' not in page
    assert "Feeds shown (1 of at most 200)" in page

    found = _section(client.get(PAGE, {"feed": "meter"}).content.decode())
    assert found.count('id="feed-match-') == FEED_MATCHES
    assert "More than 20 match: type more of the name." in found
    assert "Meter shown (id" not in found.split('id="feed-matches"')[1]  # shown already

    exact = Feed.objects.get(name="Meter 007")
    by_id = _section(client.get(PAGE, {"feed": str(exact.pk)}).content.decode())
    assert f'id="feed-match-{exact.pk}"' in by_id
    by_tag_name = _section(client.get(PAGE, {"feed": "site:Meter 02"}).content.decode())
    assert by_tag_name.count('id="feed-match-') == 5 and "More than" not in by_tag_name
    for odd in ("²", "9" * 30, "%", "'; drop table"):  # never an error, nothing matches
        assert 'id="feed-match-' not in _section(client.get(PAGE, {"feed": odd}).content.decode())
    nothing = _section(client.get(PAGE, {"feed": "no such"}).content.decode())
    assert "No feed not yet shown matches 'no such'." in nothing


def test_a_search_past_its_length_is_a_400_naming_the_field(viewer):
    at_bound = _login(viewer).get(PAGE, {"feed": "m" * MAX_SEARCH})
    assert at_bound.status_code == 200
    past = _login(viewer).get(PAGE, {"feed": "m" * (MAX_SEARCH + 1)})
    assert past.status_code == 400
    assert f"feed: at most {MAX_SEARCH} characters" in past.content.decode()


def test_the_zones_listed_are_bounded_as_the_server_serves_them(viewer, monkeypatch):
    monkeypatch.setattr(bacnet_shown, "MAX_ZONES", 2)
    for name in ("Annexe", "Barn", "Chapel"):
        f.zone(name)
    page = _section(_login(viewer).get(PAGE).content.decode())
    assert page.count('id="shown-zone-') == 2
    assert "The first 2 of 3 zones are listed" in page


def test_names_with_line_breaks_or_bidi_overrides_are_shown_on_one_line(engineer, hall):
    """A feed named "abc<U+202E>evil": the override printed the rest of its line backwards
    (a fresh-eyes tester's screenshot); a line break in a zone name broke its row's line."""
    Feed.objects.create(name="abc\u202eevil\nline two", tag="x", bacnet_export=True)
    hall.name = "Hall\u202e\nEast"
    hall.save()
    client = _login(engineer)
    client.post(f"/staff/bacnet/zones/{hall.pk}/writes", {"setting": "setpoint", "to": "on"})
    section = _section(client.get(PAGE).content.decode())
    assert "x:abcevil line two" in section and "Hall East" in section
    assert "\u202e" not in section
    assert "zone 'Hall East'" in section  # the recent change's subject too
