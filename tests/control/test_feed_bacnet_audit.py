"""A feed shown on the site's BACnet device, or taken off it, through the API or the admin,
goes into the change history (ProgrammeChange) as the staff page's switch does (feeds/
save_audit.py, registered by control): who, when, "Shown on BACnet no → yes", and the door.
A change refused, or one that leaves the choice as it was, leaves nothing there."""

from __future__ import annotations

import pytest
from django.test import Client

from control.change_audit import ADMIN_REASON, API_REASON
from control.models import ProgrammeChange
from feeds.models import MAX_BACNET_FEEDS, Feed


def _entries() -> list[tuple[str, str, str, str]]:
    return [(c.by, c.subject, c.change, c.reason) for c in ProgrammeChange.objects.order_by("pk")]


@pytest.mark.django_db
def test_an_engineers_api_choice_is_in_the_change_history_a_viewers_refusal_is_not(
    engineer, engineer_api, viewer_api
):
    feed = Feed.objects.create(name="Boiler power", tag="plant", unit="kW")
    url = f"/api/v1/feeds/{feed.pk}"
    assert viewer_api.patch(url, {"bacnet_export": True}, format="json").status_code == 403
    assert engineer_api.patch(url, {"description": "Gas boiler"}, format="json").status_code == 200
    assert _entries() == []  # refused, or the choice untouched: nothing recorded
    assert engineer_api.patch(url, {"bacnet_export": True}, format="json").status_code == 200
    assert engineer_api.patch(url, {"bacnet_export": False}, format="json").status_code == 200
    made = engineer_api.post(
        "/api/v1/feeds", {"name": "Flow", "bacnet_export": True}, format="json"
    )
    assert made.status_code == 201
    who = engineer.username
    assert _entries() == [
        (who, "feed 'plant:Boiler power'", "Shown on BACnet no → yes", API_REASON),
        (who, "feed 'plant:Boiler power'", "Shown on BACnet yes → no", API_REASON),
        (who, "feed 'Flow'", "Shown on BACnet no → yes", API_REASON),
    ]


@pytest.mark.django_db
def test_the_201st_feed_refused_on_the_api_leaves_nothing_in_the_history(engineer_api):
    Feed.objects.bulk_create(
        Feed(name=f"Feed {n}", bacnet_export=True) for n in range(MAX_BACNET_FEEDS)
    )
    past = Feed.objects.create(name="Past")
    refused = engineer_api.patch(f"/api/v1/feeds/{past.pk}", {"bacnet_export": True}, format="json")
    assert refused.status_code == 400 and "bacnet_export" in refused.json()["fields"]
    assert _entries() == []


@pytest.mark.django_db
def test_an_engineer_chooses_a_feed_in_the_admin_kept_in_the_history_a_viewer_may_not(
    engineer, viewer
):
    feed = Feed.objects.create(name="Boiler power", tag="plant", unit="kW")
    url = f"/admin/feeds/feed/{feed.pk}/change/"
    form = {"name": feed.name, "tag": feed.tag, "unit": feed.unit, "description": "",
            "bacnet_export": "on"}  # fmt: skip
    as_viewer = Client()
    as_viewer.force_login(viewer)
    assert as_viewer.post(url, form).status_code == 403
    feed.refresh_from_db()
    assert feed.bacnet_export is False and _entries() == []
    as_engineer = Client()
    as_engineer.force_login(engineer)
    assert as_engineer.post(url, form).status_code == 302
    feed.refresh_from_db()
    assert feed.bacnet_export is True
    assert as_engineer.post(url, form).status_code == 302  # saved again unchanged: no entry
    assert _entries() == [
        (engineer.username, "feed 'plant:Boiler power'", "Shown on BACnet no → yes", ADMIN_REASON)
    ]
