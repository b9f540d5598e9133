"""Open-window detection is set on the zone's admin page: an engineer adds it (bounded, the bad
field named), a viewer may look but not change it."""

from __future__ import annotations

import pytest
from django.test import Client

from control.models import WindowDetection, Zone

pytestmark = pytest.mark.django_db

PREFIX = "window_detection"


def _form(zone: Zone, **window) -> dict:
    data = {
        "name": zone.name, "slug": zone.slug, "enabled": "on", "comfort_setpoint": 20,
        "hysteresis": 0.3, "frost_on": 5, "frost_off": 7, "max_temperature": 28,
        "optimum_start": "on", "max_preheat_min": 180, "heating_rate_min_per_k": 20,
        "bookable": "on", "sensor_stale_after_s": 900,
        f"{PREFIX}-TOTAL_FORMS": 1, f"{PREFIX}-INITIAL_FORMS": 0,
        f"{PREFIX}-MIN_NUM_FORMS": 0, f"{PREFIX}-MAX_NUM_FORMS": 1,
    }  # fmt: skip
    row = {"enabled": "on", "detect_drop": "on", "drop_k": 0.5, "drop_minutes": 5,
           "pause_min": 30, "contact_open": 1, **window}  # fmt: skip
    data |= {f"{PREFIX}-0-{k}": v for k, v in row.items()}
    return data


def test_an_engineer_adds_detection_on_the_zone_page_and_a_bad_value_is_named(engineer):
    zone = Zone.objects.create(name="Hall", slug="hall")
    c = Client()
    c.force_login(engineer)
    page = c.get(f"/admin/control/zone/{zone.pk}/change/")
    assert page.status_code == 200 and "Open-window detection" in page.content.decode()

    refused = c.post(f"/admin/control/zone/{zone.pk}/change/", _form(zone, drop_k=5.1))
    assert refused.status_code == 200  # the form again, with the error
    errors = refused.context["inline_admin_formsets"][0].formset.errors
    assert "drop_k" in errors[0] and "less than or equal to 5.0" in errors[0]["drop_k"][0]
    assert not WindowDetection.objects.exists()

    saved = c.post(f"/admin/control/zone/{zone.pk}/change/", _form(zone, drop_k=5.0, pause_min=45))
    assert saved.status_code == 302
    row = WindowDetection.objects.get(zone=zone)
    assert (row.drop_k, row.pause_min) == (5.0, 45)


def test_a_viewer_sees_the_zone_page_but_cannot_add_detection(viewer):
    zone = Zone.objects.create(name="Hall", slug="hall")
    c = Client()
    c.force_login(viewer)
    assert c.get(f"/admin/control/zone/{zone.pk}/change/").status_code == 200
    response = c.post(f"/admin/control/zone/{zone.pk}/change/", _form(zone))
    assert response.status_code == 403
    assert not WindowDetection.objects.exists()
