"""The booking calendar: every hour that has a booking or a schedule period is drawn
(not only 06:00-22:00), schedule periods are shown, and /staff/bookings/ has an all-rooms week."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client

from control import calendar
from control.models import Booking, Schedule, SchedulePeriod, Zone

from . import factories as f

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")
MONDAY = date(2026, 3, 2)  # a week with no clock change


def at(day: date, hh: int, mm: int = 0) -> datetime:
    return datetime.combine(day, time(hh, mm), tzinfo=LONDON)


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def hall(redis_client) -> Zone:
    return f.zone("Hall")


def _book(zone: Zone, title: str, start: datetime, end: datetime) -> Booking:
    return Booking.objects.create(zone=zone, title=title, start=start, end=end)


def _schedule(zone: Zone, *periods: tuple[int, str, str]) -> Schedule:
    schedule = Schedule.objects.create(name=f"{zone.name} hours")
    for weekday, start, end in periods:
        SchedulePeriod.objects.create(
            schedule=schedule,
            weekday=weekday,
            start=time.fromisoformat(start),
            end=time.fromisoformat(end),
            setpoint=20.0,
        )
    zone.schedule = schedule
    zone.save()
    return schedule


def _hour_rows(html: str) -> list[str]:
    block = html.split('<div class="hours">', 1)[1].split("</div></div>", 1)[0]
    return re.findall(r"<div>(\d\d:00)</div>", block + "</div>")


def test_an_empty_week_draws_the_working_day(engineer, hall):
    html = client_for(engineer).get(f"/staff/bookings/hall/?week={MONDAY}").content.decode()
    rows = _hour_rows(html)
    assert rows[0] == "06:00" and rows[-1] == "22:00" and len(rows) == 17


def test_early_and_late_bookings_widen_the_drawn_hours(engineer, hall):
    _book(hall, "Dawn yoga", at(MONDAY, 4, 30), at(MONDAY, 5, 30))
    _book(
        hall,
        "Late gig",
        at(MONDAY + timedelta(days=4), 22, 30),
        at(MONDAY, 23, 45) + timedelta(days=4),
    )
    html = client_for(engineer).get(f"/staff/bookings/hall/?week={MONDAY}").content.decode()
    rows = _hour_rows(html)
    assert rows[0] == "04:00" and rows[-1] == "23:00"
    assert "04:30–05:30</strong> Dawn yoga" in html and "22:30–23:45</strong> Late gig" in html
    blocks = calendar.week_blocks(hall, MONDAY, LONDON)
    placed = calendar.place(blocks, calendar.hours_to_draw(blocks))
    for items in placed.values():
        for item in items:
            assert 0 <= item["top"] and item["top"] + item["height"] <= 100.0001


def test_a_booking_across_midnight_shows_on_both_days(hall):
    _book(hall, "Vigil", at(MONDAY, 22), at(MONDAY + timedelta(days=1), 2))
    blocks = calendar.week_blocks(hall, MONDAY, LONDON)
    assert [(b.title, b.start_min, b.end_min) for b in blocks[MONDAY]] == [("Vigil", 1320, 1440)]
    assert [(b.title, b.start_min, b.end_min) for b in blocks[MONDAY + timedelta(days=1)]] == [
        ("Vigil", 0, 120)
    ]
    assert calendar.hours_to_draw(blocks) == range(0, 24)


def test_schedule_periods_are_drawn_with_the_bookings(engineer, hall):
    _schedule(hall, (0, "09:00", "17:00"), (6, "22:00", "06:00"))  # Monday; Sunday night
    html = client_for(engineer).get(f"/staff/bookings/hall/?week={MONDAY}").content.decode()
    assert html.count('class="schedule"') == 3  # Monday, the night into Monday, Sunday night
    assert "09:00–17:00</strong> Hall hours (20 °C)" in html
    blocks = calendar.week_blocks(hall, MONDAY, LONDON)
    # The night of the Sunday before this week ends on this Monday at 06:00.
    assert [(b.kind, b.start_min, b.end_min) for b in blocks[MONDAY]] == [
        ("schedule", 0, 360),
        ("schedule", 540, 1020),
    ]
    assert [(b.start_min, b.end_min) for b in blocks[MONDAY + timedelta(days=6)]] == [(1320, 1440)]
    assert _hour_rows(html)[0] == "00:00"


def test_the_all_rooms_week_shows_every_room_its_bookings_and_schedule(viewer, hall, redis_client):
    studio = f.zone("Studio")
    _schedule(studio, (1, "18:00", "21:00"))
    _book(hall, "Choir", at(MONDAY, 10), at(MONDAY, 11, 30))
    _book(studio, "Pottery", at(MONDAY + timedelta(days=2), 14), at(MONDAY + timedelta(days=2), 16))
    page = client_for(viewer).get(f"/staff/bookings/?week={MONDAY}")
    assert page.status_code == 200
    html = page.content.decode()
    table = html.split('id="all-rooms"', 1)[1]
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r">(Hall|Studio)</a></th>(.*?)</tr>", table, re.S)
    }
    cells = {name: re.findall(r"<td>(.*?)</td>", row) for name, row in rows.items()}
    assert "10:00–11:30 Choir" in cells["Hall"][0]
    assert "14:00–16:00 Pottery" in cells["Studio"][2]
    assert "18:00–21:00 Studio hours (20 °C)" in cells["Studio"][1]
    assert all(cell == "" for i, cell in enumerate(cells["Hall"]) if i != 0)
    assert "Mon 2 Mar 2026" in table


@pytest.mark.parametrize("week", ["9999-12-31", "0001-01-01", "2200-01-01"])
@pytest.mark.parametrize("path", ["/staff/bookings/", "/staff/bookings/hall/"])
def test_a_week_far_from_today_shows_this_week_with_a_message(engineer, hall, week, path):
    """The first and last dates Python knows gave a 500 (the week's neighbours
    overflowed). Beyond 100 years from today: this week, and a message saying so."""
    page = client_for(engineer).get(f"{path}?week={week}")
    assert page.status_code == 200
    assert "more than 100 years from today" in page.content.decode()
    today = date.today()
    assert (today - page.context["monday"]).days in range(-1, 8)


CHRISTMAS_WEEK = date(2026, 12, 21)


def _term_time(zone: Zone) -> Schedule:
    schedule = _schedule(zone, *[(d, "08:00", "17:00") for d in range(5)])
    return schedule


def test_a_holiday_exception_shows_closed_in_the_calendar_as_the_strategy_does(engineer, hall):
    """Issue #28 item 2: 21-25 December set unoccupied drew heating every day anyway."""
    schedule = _term_time(hall)
    for day in range(21, 26):
        schedule.exceptions.create(date=date(2026, 12, day), description="Christmas")
    blocks = calendar.week_blocks(hall, CHRISTMAS_WEEK, LONDON)
    assert all(blocks[CHRISTMAS_WEEK + timedelta(days=i)] == [] for i in range(7))
    html = client_for(engineer).get(f"/staff/bookings/hall/?week={CHRISTMAS_WEEK}").content
    assert html.decode().count("Closed: Christmas") == 5
    # The week after is heated as usual.
    after = calendar.week_blocks(hall, CHRISTMAS_WEEK + timedelta(days=7), LONDON)
    assert [len(after[CHRISTMAS_WEEK + timedelta(days=7 + i)]) for i in range(7)] == [
        1, 1, 1, 1, 1, 0, 0,
    ]  # fmt: skip


def test_a_site_calendar_closure_is_closed_in_the_calendar_and_for_the_strategy(
    viewer, hall, redis_client
):
    from control import snapshot
    from control.engine.evaluator import evaluate
    from control.models import CalendarEntry, SiteCalendar

    schedule = _term_time(hall)
    site_calendar = SiteCalendar.objects.create(name="CAT closures")
    site_calendar.schedules.add(schedule)
    CalendarEntry.objects.create(
        calendar=site_calendar, first_day=date(2026, 12, 23), last_day=date(2027, 1, 1),
        description="Christmas closure",
    )  # fmt: skip
    CalendarEntry.objects.create(
        calendar=site_calendar, first_day=date(2026, 12, 26), last_day=date(2026, 12, 26),
        description="Boxing Day sale", occupied=True, start=time(10), end=time(14),
    )  # fmt: skip
    blocks = calendar.week_blocks(hall, CHRISTMAS_WEEK, LONDON)
    assert [[b.title for b in blocks[CHRISTMAS_WEEK + timedelta(days=i)]] for i in range(7)] == [
        ["Hall hours (20 °C)"],
        ["Hall hours (20 °C)"],
        [],
        [],
        [],
        # The first entry of the calendar for a day holds (the closure, not the sale).
        [],
        [],
    ]
    html = client_for(viewer).get(f"/staff/bookings/?week={CHRISTMAS_WEEK}").content.decode()
    assert html.count("Closed: Christmas closure") == 5
    # The strategy sees the same closure: unoccupied, and it says why.
    f.set_temperature(hall, 18.0, at(date(2026, 12, 23), 10).timestamp())
    tick = snapshot.build(at(date(2026, 12, 23), 10)).snapshot
    result = evaluate(tick).zones[hall.pk]
    assert "holiday 'Christmas closure'" in result.reason and not result.demand
    redis_client.flushdb()
    f.set_temperature(hall, 18.0, at(date(2026, 12, 22), 10).timestamp())
    tick = snapshot.build(at(date(2026, 12, 22), 10)).snapshot
    assert "Schedule 'Hall hours'" in evaluate(tick).zones[hall.pk].reason


def test_plant_status_lists_the_coming_days_with_closures(viewer, hall, redis_client):
    import time_machine

    from control.models import CalendarEntry, SiteCalendar
    from control.status import zone_status

    schedule = _term_time(hall)
    site_calendar = SiteCalendar.objects.create(name="CAT closures")
    site_calendar.schedules.add(schedule)
    CalendarEntry.objects.create(
        calendar=site_calendar, first_day=date(2026, 12, 23), last_day=date(2027, 1, 1),
        description="Christmas closure",
    )  # fmt: skip
    schedule.exceptions.create(
        date=date(2026, 12, 22), description="Open evening", occupied=True,
        start=time(17), end=time(21),
    )  # fmt: skip
    with time_machine.travel(at(date(2026, 12, 19), 12)):
        days = zone_status()[0]["coming_days"]
        html = client_for(viewer).get("/staff/control/").content.decode()
    assert [(d["day"].day, d["text"]) for d in days] == [
        (19, "not occupied"),
        (20, "not occupied"),
        (21, "08:00–17:00 20 °C"),
        (22, "Open evening: 17:00–21:00 20 °C"),  # the room's comfort setpoint
        (23, "closed (Christmas closure)"),
        (24, "closed (Christmas closure)"),
        (25, "closed (Christmas closure)"),
    ]
    assert "Wed 23 closed (Christmas closure)" in html
