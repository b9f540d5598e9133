"""An id too big for the database in a multiple choice (issue #28, outside tester): Django's
`pk__in` lookup handed 9223372036854775808 to the driver, which raised OverflowError (a 500).
Every staff form and admin with a multiple choice refuses it as "Select a valid choice", with
nothing changed (core/choice_fields.py); on SQLite and PostgreSQL alike."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.db import models
from django.test import Client

from control.models import HeatingPlant, HeatMain, ProgrammeChange, Schedule
from core.choice_fields import ID_MAX, BoundedModelMultipleChoiceField

from .test_plant_pages import kit, new_plant_post, plant_post  # noqa: F401  (kit: a fixture)

pytestmark = pytest.mark.django_db

OVER = str(ID_MAX + 1)  # 9223372036854775808
UNDER = str(-ID_MAX - 2)  # -9223372036854775809
REFUSED = "Select a valid choice."


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.mark.parametrize("bad", [OVER, UNDER, str(ID_MAX)])
def test_the_plant_page_refuses_an_out_of_range_room(engineer, kit, bad):  # noqa: F811
    plant = kit["plant"]
    page = client_for(engineer).post(f"/staff/plants/{plant.pk}/", plant_post(plant, zones=[bad]))
    assert page.status_code == 400
    beside = page.content.decode().split('id="field-zones"')[1].split('id="field-')[0]
    assert REFUSED in beside
    assert [z.name for z in plant.zones.all()] == ["Hall"]
    assert not ProgrammeChange.objects.exists()


def test_a_new_plant_with_an_out_of_range_room_is_refused(engineer, kit):  # noqa: F811
    data = new_plant_post(kit, 7)
    data["zones"] = [OVER]
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 400 and REFUSED in page.content.decode()
    assert HeatingPlant.objects.count() == 1 and not ProgrammeChange.objects.exists()


def test_the_schedule_page_refuses_an_out_of_range_room_and_calendar(engineer, kit):  # noqa: F811
    schedule = Schedule.objects.create(name="Term")
    for field in ("zones", "calendars"):
        page = client_for(engineer).post(
            f"/staff/schedules/{schedule.pk}/",
            {"name": "Renamed", "reason": "typo", "closure_calendar": "new", field: [OVER]},
        )
        assert page.status_code == 400, field
        assert REFUSED in page.content.decode()
    assert Schedule.objects.get().name == "Term" and not ProgrammeChange.objects.exists()


def _admin_form(url: str, client: Client) -> dict:
    """The admin's change form as the browser posts it: each input, ticked box, chosen option
    and text area with its value."""
    data: dict = {}

    class Inputs(HTMLParser):
        select: str | None = None
        textarea: str | None = None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            name = a.get("name")
            if tag == "input" and name and a.get("type") not in ("submit", "checkbox"):
                data[name] = a.get("value") or ""
            elif tag == "input" and name and a.get("type") == "checkbox" and "checked" in a:
                data.setdefault(name, []).append(a.get("value") or "on")
            elif tag == "select" and name:
                self.select = name
            elif tag == "option" and self.select and "selected" in a:
                data.setdefault(self.select, []).append(a.get("value") or "")
            elif tag == "textarea" and name:
                self.textarea = name
                data[name] = ""

        def handle_data(self, text):
            if self.textarea:
                data[self.textarea] += text

        def handle_endtag(self, tag):
            if tag == "select":
                self.select = None
            elif tag == "textarea":
                self.textarea = None

    Inputs().feed(client.get(url).content.decode())
    return data


@pytest.mark.parametrize("model", ["heatingplant", "heatmain"])
def test_the_admin_refuses_an_out_of_range_room(superuser, kit, model):  # noqa: F811
    obj = kit["plant"] if model == "heatingplant" else HeatMain.objects.create(name="Heat main")
    url = f"/admin/control/{model}/{obj.pk}/change/"
    c = client_for(superuser)
    data = _admin_form(url, c)
    data.update(name="Renamed", zones=[OVER])
    page = c.post(url, data)
    # The admin shows an invalid form again with 200, as for any other mistake; never a 500.
    assert page.status_code == 200
    assert REFUSED in page.content.decode()
    obj.refresh_from_db()
    assert obj.name != "Renamed"


def _has_m2m(model_admin) -> list[models.ManyToManyField]:
    return [f for f in model_admin.model._meta.many_to_many]


def test_every_admin_with_a_multiple_choice_refuses_out_of_range_ids(rf, superuser):
    """A new admin with a many-to-many field must use core.choice_fields.BoundedIdsAdmin."""
    request = rf.get("/admin/")
    request.user = superuser
    unbounded = []
    for model, model_admin in admin.site._registry.items():
        admins = [model_admin, *(i(model, admin.site) for i in model_admin.inlines)]
        for one in admins:
            for field in _has_m2m(one):
                formfield = one.formfield_for_dbfield(field, request)
                if formfield is not None and not isinstance(
                    formfield, BoundedModelMultipleChoiceField
                ):
                    unbounded.append(f"{one.model._meta.label}.{field.name}")
    assert unbounded == []


def test_single_choices_and_the_api_refuse_it_too(engineer, engineer_api, kit):  # noqa: F811
    """Checked, not changed: Django's exact lookup and DRF's related fields already say no."""
    plant = kit["plant"]
    page = client_for(engineer).post(f"/staff/plants/{plant.pk}/", plant_post(plant, boiler=OVER))
    assert page.status_code == 400 and REFUSED in page.content.decode()
    for body in ({"zones": [int(OVER)]}, {"boiler": int(OVER)}, {"index_zone": int(OVER)}):
        api = engineer_api.patch(f"/api/v1/heating-plants/{plant.pk}/", body, format="json")
        assert api.status_code == 400, body
        assert list(api.json()["fields"]) == list(body)
    api = engineer_api.patch(f"/api/v1/heat-mains/{HeatMain.objects.create(name='M').pk}/",
                             {"zones": [int(OVER)]}, format="json")  # fmt: skip
    assert api.status_code == 400 and "zones" in api.json()["fields"]
    assert [z.name for z in plant.zones.all()] == ["Hall"] and not ProgrammeChange.objects.exists()
