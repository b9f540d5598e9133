"""The staff energy page: staff roles see the figures, others are refused."""

from __future__ import annotations

from datetime import date

import pytest

from energy.models import Meter, MeterDay, MeterNode
from feeds.models import Feed
from sensors.models import Site


@pytest.fixture
def tree(db):
    site = Site.objects.create(name="CAT", slug="cat")
    b = MeterNode.objects.create(site=site, name="Office", kind="building", floor_area_m2=100,
                                 tm46_category="general_office")  # fmt: skip
    feed = Feed.objects.create(name="e", tag="t", interval=60)
    m = Meter.objects.create(node=b, name="Elec", fuel="electricity", source="power", feed=feed)
    for d, v in ((1, 10.0), (2, 12.5), (3, None)):
        MeterDay.objects.create(meter=m, day=date(2024, 5, d), value=v,
                                status="gap" if v is None else "measured")  # fmt: skip
    return site, b


def test_viewer_sees_figures(client, viewer, tree):
    site, b = tree
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?site={site.pk}&node={b.pk}&start=2024-05-01&end=2024-05-03")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="total">22.5 kWh' in html
    assert 'id="gap-days">1' in html
    assert "Buildings by kWh/m²" in html and "0.2" in html  # 22.5 kWh / 100 m²


def test_user_without_role_is_refused_and_anonymous_sent_to_login(client, db, tree):
    from django.contrib.auth.models import User

    assert client.get("/staff/energy/").status_code == 302
    client.force_login(User.objects.create_user("nobody", password="x"))
    assert client.get("/staff/energy/").status_code == 403


def test_bad_range_is_400(client, viewer, tree):
    client.force_login(viewer)
    assert client.get("/staff/energy/?start=2024-05-03&end=2024-05-01").status_code == 400
