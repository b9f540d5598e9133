"""Schedules, site calendars and rooms in buildings on the staff pages (issue #28 item 1):
one form sets a week, a closure and a whole building's rooms; the strategy's own spec then has
the closure; every change is audited with who and why; engineers write, every other role reads,
each rule from both sides; bad input is a 400 naming the field with nothing stored."""

from __future__ import annotations

from datetime import date, time

import pytest
from django.test import Client

from control import mapper
from control.models import (
    CALENDAR_ENTRY_MAX_DAYS,
    CALENDAR_MAX_ENTRIES,
    CalendarEntry,
    ProgrammeChange,
    Schedule,
    SchedulePeriod,
    SiteCalendar,
)
from energy.models import MeterNode
from sensors.models import Site
from staff.models import ZonePlace

from ..control import factories as f

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def lecture_block(redis_client) -> dict:
    """A building with a floor; two rooms placed in it (one on the floor), one elsewhere."""
    site = Site.objects.create(name="CAT", slug="cat")
    building = MeterNode.objects.create(site=site, name="Lecture block", kind="building")
    floor = MeterNode.objects.create(site=site, parent=building, name="First floor", kind="floor")
    other = MeterNode.objects.create(site=site, name="Workshop", kind="building")
    theatre, seminar, shed = f.zone("Theatre"), f.zone("Seminar"), f.zone("Shed")
    ZonePlace.objects.create(zone=theatre, node=building)
    ZonePlace.objects.create(zone=seminar, node=floor)
    ZonePlace.objects.create(zone=shed, node=other)
    return {"building": building, "theatre": theatre, "seminar": seminar, "shed": shed}


def week_post(**extra) -> dict:
    data = {"name": "Term time", "reason": "Spring term hours", "closure_calendar": "new"}
    for day in range(5):
        data[f"d{day}_0_start"], data[f"d{day}_0_end"], data[f"d{day}_0_setpoint"] = (
            "08:00",
            "17:00",
            "20",
        )
    data.update(extra)
    return data


def test_one_form_sets_a_week_a_closure_and_a_whole_building(engineer, lecture_block):
    building = lecture_block["building"]
    page = client_for(engineer).post(
        "/staff/schedules/new/",
        week_post(
            building=building.pk,
            closure_first="2026-12-21",
            closure_last="2026-12-25",
            closure_description="Christmas closure",
        ),
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    schedule = Schedule.objects.get(name="Term time")
    assert sorted((p.weekday, p.start, p.end, p.setpoint) for p in schedule.periods.all()) == [
        (d, time(8), time(17), 20.0) for d in range(5)
    ]
    # Every room in the building or below it, and no other.
    assert {z.name for z in schedule.zones.all()} == {"Theatre", "Seminar"}
    calendar = schedule.calendars.get()
    entry = calendar.entries.get()
    assert (entry.first_day, entry.last_day, entry.occupied) == (
        date(2026, 12, 21),
        date(2026, 12, 25),
        False,
    )
    # The strategy's own spec has the closure as five unoccupied days, and no others.
    spec = mapper.schedule_spec(schedule)
    assert [(e.day, e.occupied, e.description) for e in spec.exceptions] == [
        (date(2026, 12, d), False, "Christmas closure") for d in range(21, 26)
    ]
    change = ProgrammeChange.objects.get()
    assert change.by == engineer.username and change.reason == "Spring term hours"
    assert "Mon–Fri 08:00–17:00 20 °C" in change.change
    assert "Christmas closure" in change.change and "Lecture block" in change.change


def test_a_room_taken_from_another_schedule_is_said_and_audited_on_both(engineer, lecture_block):
    # A room follows one schedule: applying one to a building moves its rooms, said in the
    # message and recorded on the schedule they left (an outside tester found it silent).
    evenings = Schedule.objects.create(name="Evening classes")
    seminar = lecture_block["seminar"]
    seminar.schedule = evenings
    seminar.save()
    page = client_for(engineer).post(
        "/staff/schedules/new/", week_post(building=lecture_block["building"].pk), follow=True
    )
    assert page.status_code == 200
    assert "moved from schedule &#x27;Evening classes&#x27;" in page.content.decode()
    seminar.refresh_from_db()
    assert seminar.schedule.name == "Term time"
    left = ProgrammeChange.objects.get(subject__contains="Evening classes")
    assert left.change == "rooms moved to schedule 'Term time': Seminar"
    assert left.by == engineer.username and left.reason == "Spring term hours"


def test_a_schedule_own_exception_day_wins_over_its_calendar(engineer, lecture_block):
    schedule = Schedule.objects.create(name="Office")
    calendar = SiteCalendar.objects.create(name="Holidays")
    calendar.schedules.add(schedule)
    CalendarEntry.objects.create(
        calendar=calendar, first_day=date(2026, 12, 24), last_day=date(2026, 12, 26),
        description="Christmas",
    )  # fmt: skip
    schedule.exceptions.create(
        date=date(2026, 12, 24), description="Carol service", occupied=True,
        start=time(18), end=time(21),
    )  # fmt: skip
    spec = mapper.schedule_spec(schedule, days=(date(2026, 12, 24), date(2026, 12, 25)))
    assert [(e.day, e.occupied, e.description) for e in spec.exceptions] == [
        (date(2026, 12, 24), True, "Carol service"),
        (date(2026, 12, 25), False, "Christmas"),
    ]


def test_editing_shows_the_stored_week_and_replaces_it(engineer, lecture_block):
    schedule = Schedule.objects.create(name="Office")
    SchedulePeriod.objects.create(schedule=schedule, weekday=2, start=time(9), end=time(12))
    c = client_for(engineer)
    html = c.get(f"/staff/schedules/{schedule.pk}/").content.decode()
    assert 'name="d2_0_start" value="09:00"' in html
    page = c.post(f"/staff/schedules/{schedule.pk}/", week_post(name="Office"))
    assert page.status_code == 302
    assert schedule.periods.count() == 5 and not schedule.periods.filter(weekday=2, start=time(9))


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"d0_0_end": ""}, "d0_0_end"),
        ({"d0_0_setpoint": "31"}, "d0_0_setpoint"),
        ({"d0_0_start": "25:00"}, "d0_0_start"),
        ({"reason": ""}, "reason"),
        ({"name": ""}, "name"),
        (
            {
                "closure_first": "2026-12-25",
                "closure_last": "2026-12-21",
                "closure_description": "Backwards",
            },
            "closure_last",
        ),  # fmt: skip
        ({"closure_first": "2026-12-21"}, "closure_description"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    engineer, lecture_block, changes, field
):
    page = client_for(engineer).post("/staff/schedules/new/", week_post(**changes))
    assert page.status_code == 400
    assert field in page.context["form"].errors
    assert not Schedule.objects.exists() and not ProgrammeChange.objects.exists()


def test_overlapping_periods_are_refused_and_leave_the_stored_week(engineer, lecture_block):
    schedule = Schedule.objects.create(name="Office")
    SchedulePeriod.objects.create(schedule=schedule, weekday=0, start=time(9), end=time(12))
    page = client_for(engineer).post(
        f"/staff/schedules/{schedule.pk}/",
        week_post(name="Office", d0_1_start="16:00", d0_1_end="18:00"),
    )
    assert page.status_code == 400
    assert "overlaps" in " ".join(page.context["form"].errors["d0_1_start"])
    assert [(p.weekday, p.start) for p in schedule.periods.all()] == [(0, time(9))]
    assert not ProgrammeChange.objects.exists()


def test_a_closure_at_the_bound_is_kept_and_one_day_more_refused(engineer, lecture_block):
    first = date(2026, 1, 1)
    longest = date.fromordinal(first.toordinal() + CALENDAR_ENTRY_MAX_DAYS - 1)
    too_long = date.fromordinal(longest.toordinal() + 1)
    c = client_for(engineer)
    closure = {"closure_first": first.isoformat(), "closure_description": "Refurbishment"}
    page = c.post("/staff/schedules/new/", week_post(closure_last=too_long, **closure))
    assert page.status_code == 400 and "closure_last" in page.context["form"].errors
    page = c.post("/staff/schedules/new/", week_post(closure_last=longest, **closure))
    assert page.status_code == 302
    assert CalendarEntry.objects.get().days() == CALENDAR_ENTRY_MAX_DAYS


def test_a_building_with_no_rooms_placed_is_refused_by_name(engineer, lecture_block):
    site = lecture_block["building"].site
    empty = MeterNode.objects.create(site=site, name="Empty hall", kind="building")
    page = client_for(engineer).post("/staff/schedules/new/", week_post(building=empty.pk))
    assert page.status_code == 400
    assert "Empty hall" in " ".join(page.context["form"].errors["building"])  # beside the field
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "booker"])
def test_other_roles_read_schedules_but_may_not_change_them(request, role, engineer, lecture_block):
    user = request.getfixturevalue(role)
    schedule = Schedule.objects.create(name="Office")
    calendar = SiteCalendar.objects.create(name="Holidays")
    c = client_for(user)
    for path in (
        "/staff/schedules/",
        f"/staff/schedules/{schedule.pk}/",
        "/staff/schedules/rooms/",
        "/staff/calendars/",
        f"/staff/calendars/{calendar.pk}/",
    ):
        page = c.get(path)
        assert page.status_code == 200, path
        assert "Read only" in page.content.decode() or "read schedules only" in (
            page.content.decode()
        ), path
        assert "<button>Save" not in page.content.decode()
    assert c.get("/staff/schedules/new/").status_code == 403
    assert c.post("/staff/schedules/new/", week_post()).status_code == 403
    assert c.post(f"/staff/schedules/{schedule.pk}/", week_post()).status_code == 403
    assert c.post("/staff/calendars/", {"name": "X", "reason": "r"}).status_code == 403
    entry = {"first_day": "2026-12-25", "description": "Xmas", "reason": "r"}
    assert c.post(f"/staff/calendars/{calendar.pk}/", entry).status_code == 403
    assert c.post("/staff/schedules/rooms/", {"reason": "r"}).status_code == 403
    assert not schedule.periods.exists() and not calendar.entries.exists()
    assert not ProgrammeChange.objects.exists()


def test_anonymous_and_roleless_users_are_kept_out(django_user_model, lecture_block):
    assert Client().get("/staff/schedules/").status_code == 302
    nobody = django_user_model.objects.create_user("nobody", password="x")
    assert client_for(nobody).get("/staff/calendars/").status_code == 403


def test_engineer_places_rooms_in_buildings_audited(engineer, lecture_block):
    shed, building = lecture_block["shed"], lecture_block["building"]
    c = client_for(engineer)
    page = c.post(
        "/staff/schedules/rooms/",
        {
            f"zone_{shed.pk}": str(building.pk),
            f"zone_{lecture_block['theatre'].pk}": str(building.pk),
            f"zone_{lecture_block['seminar'].pk}": "",
            "reason": "Shed moved",
        },
    )
    assert page.status_code == 302
    assert ZonePlace.objects.get(zone=shed).node == building
    assert not ZonePlace.objects.filter(zone=lecture_block["seminar"]).exists()
    change = ProgrammeChange.objects.get()
    assert "Shed in Lecture block" in change.change and "Seminar: not placed" in change.change
    page = c.post("/staff/schedules/rooms/", {f"zone_{shed.pk}": "999999", "reason": "x"})
    assert page.status_code == 400 and f"zone_{shed.pk}" in page.context["form"].errors


def test_calendar_offers_public_holidays_and_adds_those_ticked(engineer, lecture_block):
    calendar = SiteCalendar.objects.create(name="CAT holidays", country="GB", subdivision="WLS")
    c = client_for(engineer)
    html = c.get(f"/staff/calendars/{calendar.pk}/?year=2026").content.decode()
    assert "Christmas Day" in html and "Boxing Day" in html and "Easter Monday" in html
    page = c.post(
        f"/staff/calendars/{calendar.pk}/?year=2026",
        {"add_holidays": "1", "year": "2026", "days": ["2026-12-25", "2026-12-28"],
         "reason": "Bank holidays"},
    )  # fmt: skip
    assert page.status_code == 302
    assert [(e.first_day, e.description) for e in calendar.entries.all()] == [
        (date(2026, 12, 25), "Christmas Day"),
        (date(2026, 12, 28), "Boxing Day (observed)"),
    ]
    # Added ones are no longer offered; a day the library does not list is refused.
    html = c.get(f"/staff/calendars/{calendar.pk}/?year=2026").content.decode()
    assert 'value="2026-12-25"' not in html and 'value="2026-12-26"' in html
    page = c.post(
        f"/staff/calendars/{calendar.pk}/",
        {"add_holidays": "1", "year": "2026", "days": ["2026-07-01"], "reason": "x"},
    )
    assert page.status_code == 400 and "days" in page.context["holiday_form"].errors
    assert ProgrammeChange.objects.count() == 1


def test_an_unknown_country_says_so_instead_of_failing(engineer, lecture_block):
    calendar = SiteCalendar.objects.create(name="Nowhere", country="ZZ")
    page = client_for(engineer).get(f"/staff/calendars/{calendar.pk}/")
    assert page.status_code == 200
    assert "No public holidays are known for &#x27;ZZ&#x27;" in page.content.decode()


def test_calendar_entries_are_checked_and_removal_needs_a_reason(engineer, lecture_block):
    calendar = SiteCalendar.objects.create(name="Term")
    c = client_for(engineer)
    bad = {"first_day": "2026-10-26", "last_day": "2026-10-20", "description": "Half term",
           "reason": "r"}  # fmt: skip
    page = c.post(f"/staff/calendars/{calendar.pk}/", bad)
    assert page.status_code == 400 and "last_day" in page.context["entry_form"].errors
    special = {"first_day": "2026-10-24", "description": "Open day", "occupied": "on",
               "reason": "r"}  # fmt: skip
    page = c.post(f"/staff/calendars/{calendar.pk}/", special)
    assert page.status_code == 400 and "start" in page.context["entry_form"].errors
    good = dict(bad, last_day="2026-10-30")
    assert c.post(f"/staff/calendars/{calendar.pk}/", good).status_code == 302
    entry = calendar.entries.get()
    url = f"/staff/calendars/{calendar.pk}/entries/{entry.pk}/delete/"
    c.post(url, {"reason": ""})
    assert calendar.entries.exists()
    c.post(url, {"reason": "Half term moved"})
    assert not calendar.entries.exists()
    assert [ch.change for ch in ProgrammeChange.objects.order_by("at", "pk")] == [
        f"closure {entry} added",
        f"{entry} removed",
    ]


def test_a_calendar_takes_entries_up_to_its_bound_and_refuses_one_more(engineer, lecture_block):
    calendar = SiteCalendar.objects.create(name="Busy")
    CalendarEntry.objects.bulk_create(
        CalendarEntry(calendar=calendar, first_day=date(2020, 1, 1), last_day=date(2020, 1, 1),
                      description=f"Day {i}")
        for i in range(CALENDAR_MAX_ENTRIES - 1)
    )  # fmt: skip
    c = client_for(engineer)
    entry = {"first_day": "2026-12-25", "description": "Christmas", "reason": "r"}
    assert c.post(f"/staff/calendars/{calendar.pk}/", entry).status_code == 302
    page = c.post(f"/staff/calendars/{calendar.pk}/", dict(entry, description="One more"))
    assert page.status_code == 400
    assert "at most 500 entries" in " ".join(page.context["entry_form"].non_field_errors())
    assert calendar.entries.count() == CALENDAR_MAX_ENTRIES


def test_a_long_closure_is_expanded_only_over_the_days_asked_for(lecture_block):
    """The tick asks for five days around now, replay for its range: a year-long closure
    becomes those days, not 366 exception days per zone per tick."""
    schedule = Schedule.objects.create(name="Mothballed")
    calendar = SiteCalendar.objects.create(name="Refurbishment")
    calendar.schedules.add(schedule)
    CalendarEntry.objects.create(
        calendar=calendar, first_day=date(2026, 1, 1), last_day=date(2026, 12, 31),
        description="Refurbishment",
    )  # fmt: skip
    spec = mapper.schedule_spec(schedule, days=(date(2026, 6, 1), date(2026, 6, 4)))
    assert [e.day for e in spec.exceptions] == [date(2026, 6, d) for d in range(1, 5)]
    assert len(mapper.schedule_spec(schedule).exceptions) == 365
    outside = mapper.schedule_spec(schedule, days=(date(2027, 1, 1), date(2027, 1, 5)))
    assert outside.exceptions == ()


@pytest.mark.parametrize(
    "country, region, field",
    [("ZZ", "", "country"), ("GB", "XYZ", "subdivision"), ("", "WLS", "subdivision")],
)
def test_a_calendar_country_or_region_unknown_is_named(engineer, country, region, field):
    page = client_for(engineer).post(
        "/staff/calendars/",
        {"name": "Holidays", "country": country, "subdivision": region, "reason": "r"},
    )
    assert page.status_code == 400 and field in page.context["form"].errors
    assert not SiteCalendar.objects.exists()


def test_a_calendar_with_a_known_region_is_created_and_audited(engineer):
    page = client_for(engineer).post(
        "/staff/calendars/",
        {"name": "Holidays", "country": "gb", "subdivision": "wls", "reason": "Start"},
    )
    assert page.status_code == 302
    calendar = SiteCalendar.objects.get()
    assert (calendar.country, calendar.subdivision) == ("GB", "WLS")
    assert ProgrammeChange.objects.get().subject == "calendar 'Holidays'"


def test_the_schedule_form_shows_every_error_at_once(engineer, lecture_block):
    """A field error, a period rule of the model and a closure error in one answer (#28): the
    overlap and the zero-length period used to wait until the form's other errors were fixed."""
    site = lecture_block["building"].site
    empty = MeterNode.objects.create(site=site, name="Empty barn", kind="building")
    page = client_for(engineer).post(
        "/staff/schedules/new/",
        week_post(
            name="",
            d0_1_start="16:00",
            d0_1_end="18:00",
            d1_1_start="19:00",
            d1_1_end="19:00",
            closure_first="2026-12-21",
            building=empty.pk,
        ),
    )
    assert page.status_code == 400
    errors = page.context["form"].errors
    assert set(errors) == {"name", "d0_1_start", "d1_1_end", "closure_description", "building"}
    assert "overlaps Monday 08:00–17:00" in errors["d0_1_start"][0]
    assert "must not end when it starts" in errors["d1_1_end"][0]
    assert "No room is placed in 'Empty barn'" in errors["building"][0]
    assert not Schedule.objects.exists() and not ProgrammeChange.objects.exists()


def test_the_holiday_picker_follows_the_year_worked_on(engineer, lecture_block):
    """A closure added for next year brings the page, and its public holidays, to that year;
    removing a day keeps the page on the removed day's year (#28 leftover)."""
    calendar = SiteCalendar.objects.create(name="CAT holidays", country="GB", subdivision="WLS")
    c = client_for(engineer)
    page = c.post(
        f"/staff/calendars/{calendar.pk}/?year=2026",
        {"first_day": "2027-12-24", "description": "Christmas Eve closure", "reason": "Plan"},
    )
    assert page.status_code == 302 and page["Location"].endswith("?year=2027")
    html = c.get(page["Location"]).content.decode()
    assert "GB-WLS, 2027</h2>" in html and 'value="2027-12-27"' in html  # 2027's Christmas
    page = c.post(
        f"/staff/calendars/{calendar.pk}/",
        {"add_holidays": "1", "year": "2028", "days": ["2028-12-25"], "reason": "Bank holidays"},
    )
    assert page.status_code == 302 and page["Location"].endswith("?year=2028")
    entry = calendar.entries.get(first_day=date(2027, 12, 24))
    page = c.post(
        f"/staff/calendars/{calendar.pk}/entries/{entry.pk}/delete/", {"reason": "Open after all"}
    )
    assert page.status_code == 302 and page["Location"].endswith("?year=2027")
