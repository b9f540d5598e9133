"""A NUL byte in any query parameter is a 400 naming it, on every database.

Found by the kiosk fuzz in CI on PostgreSQL: `/kiosk/?rotate=%00` reached a slug lookup and
PostgreSQL refused the text (a 500); SQLite had answered 404, so local runs passed.
"""

from __future__ import annotations

import pytest
from django.test import Client

from displays.models import Display


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path, params, field",
    [
        ("/kiosk/", {"rotate": "\x00"}, "rotate"),
        ("/kiosk/", {"rotate": "fuzz,\x00a"}, "rotate"),
        ("/kiosk/fuzz/", {"refresh": "1\x00"}, "refresh"),
        ("/feed/data.json", {"id": "1", "start": "\x00"}, "start"),
        ("/api/v1/feeds/", {"x\x00": "1"}, "x\\x00"),
    ],
)
def test_nul_in_query_is_refused(path, params, field):
    Display.objects.create(slug="fuzz", title="Fuzz", public=True)
    response = Client().get(path, params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(f"{field}: NUL bytes")
    assert response.json()["field"] == field
    assert response.json()["fields"] == {field: ["NUL bytes are not allowed in a query parameter."]}


@pytest.mark.django_db
def test_ordinary_query_still_answers():
    Display.objects.create(slug="fuzz", title="Fuzz", public=True)
    response = Client().get("/kiosk/", {"rotate": "fuzz"})
    assert response.status_code == 200
    assert b"/kiosk/fuzz/" in response.content
