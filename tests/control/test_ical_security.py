"""A zone's iCal URL must not read the server's files or services, nor quote what it
fetched into alarms; a feed is bounded in bytes, time, events and occurrences.

Real local HTTP servers stand for the services inside the server: each records its requests,
so a refused URL is proven never fetched.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from alarms.models import Alarm
from control import ical, ical_fetch
from control.ical import IcalError, sync_all, sync_zone
from control.models import Booking, Zone
from tests.control.feed_server import FeedServer
from tests.tls_certs import make_ca_and_server_cert
from tests.wait import returns_within

NOW = datetime(2026, 3, 20, 9, 0, tzinfo=UTC)
SECRET = "SECRET_KEY=do-not-show-this-1234"

ONE_EVENT = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:one@example.org
SUMMARY:Choir
DTSTART:20260321T180000Z
DTEND:20260321T200000Z
END:VEVENT
END:VCALENDAR
"""


def flood(events: int, rule: str = "FREQ=MINUTELY", dtstart: str = "20260320T090000Z") -> str:
    """The 1.5 KB calendar an outside check sent: a few events, each repeating every minute."""
    body = "".join(
        f"BEGIN:VEVENT\nUID:flood-{i}@example.org\nSUMMARY:Flood {i}\nDTSTART:{dtstart}\n"
        f"DURATION:PT1M\nRRULE:{rule}\nEND:VEVENT\n"
        for i in range(events)
    )
    return f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\n{body}END:VCALENDAR\n"


@pytest.fixture
def inside(tmp_path):
    """A service inside the server (loopback), holding a secret; not on the allow-list."""
    (tmp_path / "secret.ics").write_text(SECRET + "\n")
    (tmp_path / "feed.ics").write_text(ONE_EVENT)
    with FeedServer(tmp_path) as server:
        yield server


def _zone(url: str) -> Zone:
    """A zone whose URL was stored without validation (before this fix, or by a migration)."""
    zone = Zone.objects.create(name="Hall", slug="hall")
    Zone.objects.filter(pk=zone.pk).update(ical_url=url)
    zone.refresh_from_db()
    return zone


def _alarm_text(zone: Zone) -> str:
    return " ".join(Alarm.objects.filter(key__startswith="ical").values_list("message", flat=True))


# --- validation when the URL is set (model clean: admin and API alike) ------------------------


REFUSED = [
    ("file:///etc/passwd", "only http"),
    ("/etc/passwd", "only http"),
    ("/proc/self/environ", "only http"),
    ("var/admin-password", "only http"),
    ("ftp://example.org/feed.ics", "only http"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[::1]/feed.ics", "loopback"),
    ("http://[::ffff:127.0.0.1]/feed.ics", "loopback"),
    ("http://0.0.0.0/feed.ics", "unspecified"),
    ("http://10.1.2.3/feed.ics", "private"),
    ("http://192.168.1.20/feed.ics", "private"),
    ("http://localhost/feed.ics", "loopback"),
    ("http://user:pw@example.org/feed.ics", "user name or password"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_the_model_refuses_urls_inside_the_server(db, url, why):
    zone = Zone(name="Hall", slug="hall", ical_url=url)
    with pytest.raises(ValidationError) as caught:
        zone.full_clean()
    assert why in " ".join(caught.value.message_dict["ical_url"])


def test_the_api_refuses_a_loopback_url_naming_the_field(engineer_api, inside):
    zone = Zone.objects.create(name="Hall", slug="hall")
    response = engineer_api.patch(
        f"/api/v1/zones/{zone.pk}", {"ical_url": inside.url("secret.ics")}, format="json"
    )
    assert response.status_code == 400
    assert "loopback" in response.json()["fields"]["ical_url"][0]
    zone.refresh_from_db()
    assert zone.ical_url == ""
    assert inside.requests == []


def test_the_api_refuses_a_file_path(engineer_api, db):
    zone = Zone.objects.create(name="Hall", slug="hall")
    response = engineer_api.patch(
        f"/api/v1/zones/{zone.pk}", {"ical_url": "/proc/self/environ"}, format="json"
    )
    assert response.status_code == 400
    assert "ical_url" in response.json()["fields"]


def test_a_public_url_is_accepted(db):
    # Not fetched here: clean() resolves the name, and a literal public address needs no DNS.
    Zone(name="Hall", slug="hall", ical_url="https://93.184.215.14/calendar.ics").full_clean()


def test_a_name_that_does_not_resolve_yet_is_saved_and_checked_at_fetch(db):
    # DNS down must not stop an engineer saving the zone's other settings.
    zone = Zone(name="Hall", slug="hall", ical_url="https://calendar.invalid/feed.ics")
    zone.full_clean()
    zone.save()
    with pytest.raises(IcalError, match="cannot resolve host calendar.invalid"):
        sync_zone(zone, now=NOW)


# --- the fetch checks again (a URL stored before, DNS that changed) ---------------------------


def test_a_loopback_server_never_gets_the_request(db, inside):
    zone = _zone(inside.url("secret.ics"))
    report = sync_all()
    assert "loopback" in report["hall"]["error"]
    assert inside.requests == []
    assert SECRET not in _alarm_text(zone)


def test_localhost_by_name_is_refused_at_fetch(db, inside):
    zone = _zone(f"http://localhost:{inside.port}/secret.ics")
    with pytest.raises(IcalError, match="loopback"):
        sync_zone(zone, now=NOW)
    assert inside.requests == []


@pytest.mark.parametrize("path", ["/etc/passwd", "file:///proc/self/environ"])
def test_a_file_path_is_never_read(db, path):
    zone = _zone(path)
    report = sync_all()
    assert "only http" in report["hall"]["error"]
    assert "root:" not in _alarm_text(zone) and "SECRET_KEY" not in _alarm_text(zone)


def test_a_server_file_is_not_quoted_into_an_alarm(db, tmp_path):
    secret = tmp_path / "admin-password"
    secret.write_text(SECRET + "\n")
    zone = _zone(str(secret))
    sync_all()
    assert Alarm.objects.filter(key=f"ical:{zone.pk}", cleared_at__isnull=True).exists()
    assert SECRET not in _alarm_text(zone)


def test_fetched_content_is_never_echoed(db, inside, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    zone = _zone(inside.url("secret.ics"))
    report = sync_all()
    assert report["hall"]["error"] == "the feed is not an iCalendar file"
    assert inside.requests == ["/secret.ics"]  # allowed, fetched, but not quoted
    assert SECRET not in _alarm_text(zone)


def test_a_redirect_to_loopback_is_refused(db, tmp_path, inside, settings):
    # The first server is allowed (127.0.0.2 only); it redirects to the one that is not.
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.2"]
    with FeedServer(tmp_path, host="127.0.0.2") as outer:
        outer.redirects["/feed.ics"] = inside.url("secret.ics")
        zone = _zone(outer.url("feed.ics"))
        with pytest.raises(IcalError, match="loopback"):
            sync_zone(zone, now=NOW)
        assert outer.requests == ["/feed.ics"]
    assert inside.requests == []


def test_a_redirect_within_the_allow_list_is_followed(db, tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.0/8"]
    (tmp_path / "feed.ics").write_text(ONE_EVENT)
    with FeedServer(tmp_path) as server:
        server.redirects["/old.ics"] = "/feed.ics"
        zone = _zone(server.url("old.ics"))
        assert sync_zone(zone, now=NOW)["created"] == 1
        assert server.requests == ["/old.ics", "/feed.ics"]


def test_the_allow_list_names_a_host(db, tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["localhost"]
    (tmp_path / "feed.ics").write_text(ONE_EVENT)
    with FeedServer(tmp_path) as server:
        zone = Zone(name="Hall", slug="hall", ical_url=f"http://localhost:{server.port}/feed.ics")
        zone.full_clean()
        zone.save()
        assert sync_zone(zone, now=NOW)["created"] == 1


def test_an_ipv6_loopback_server_is_refused(db, tmp_path):
    (tmp_path / "feed.ics").write_text(ONE_EVENT)
    try:
        server = FeedServer(tmp_path, host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with server:
        zone = _zone(server.url("feed.ics"))
        with pytest.raises(IcalError, match="loopback"):
            sync_zone(zone, now=NOW)
        assert server.requests == []


# --- bounds: bytes, time ------------------------------------------------------------------------


def test_a_feed_over_the_byte_limit_is_refused(db, tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.BMS_ICAL_MAX_BYTES = 4096
    (tmp_path / "at.ics").write_text(ONE_EVENT.ljust(4096 - 1) + "\n")
    (tmp_path / "over.ics").write_text(ONE_EVENT.ljust(4096) + "\n")
    with FeedServer(tmp_path) as server:
        assert sync_zone(_zone(server.url("at.ics")), now=NOW)["created"] == 1
        Zone.objects.all().delete()
        with pytest.raises(IcalError, match="larger than 4096 bytes"):
            sync_zone(_zone(server.url("over.ics")), now=NOW)


@pytest.fixture
def trickler():
    """A server that answers one header byte every 0.2 s for 10 s: each read is quick, the
    whole is not. (A per-read timeout alone would wait all 10 s; a slower server, for ever.)"""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    cut_off = threading.Event()  # the client shut the connection before the 10 s were up

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            ends = time.monotonic() + 10
            while not stop.wait(0.2) and time.monotonic() < ends:
                try:
                    conn.sendall(b"X")
                except OSError:
                    cut_off.set()
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], cut_off
    stop.set()
    listener.close()


def test_a_slow_server_is_cut_off_at_the_total_timeout(db, settings, trickler):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.BMS_ICAL_TIMEOUT_S = 1.0
    port, cut_off = trickler
    zone = _zone(f"http://127.0.0.1:{port}/feed.ics")
    with pytest.raises(IcalError):
        sync_zone(zone, now=NOW)
    # The fetch was shut mid-trickle, not left to the server's 10 s end (then a per-read
    # timeout would have done, and a slower server would be waited for for ever).
    assert cut_off.wait(10), "the server trickled to its end: no total timeout"


# --- bounds: events and occurrences -----------------------------------------------------------


@pytest.fixture
def served(tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    with FeedServer(tmp_path) as server:
        yield tmp_path, server


def test_a_minutely_flood_is_capped_and_alarmed(db, served, settings):
    directory, server = served
    first = timezone.now().replace(second=0, microsecond=0, tzinfo=UTC)
    (directory / "flood.ics").write_text(flood(10, dtstart=f"{first:%Y%m%dT%H%M%SZ}"))
    zone = Zone.objects.create(name="Hall", slug="hall", ical_url=server.url("flood.ics"))
    report = sync_all()
    made = Booking.objects.filter(zone=zone, source="ical")
    assert made.count() == settings.BMS_ICAL_MAX_OCCURRENCES == 2000
    assert report["hall"]["capped"] == 1
    alarm = Alarm.objects.get(key=f"ical-capped:{zone.pk}", cleared_at__isnull=True)
    assert "Hall" in alarm.message and "Flood" not in alarm.message
    # The soonest were kept: 10 events a minute, 2000 of them fill the first 200 minutes.
    assert made.order_by("-start").first().start == first + timedelta(minutes=199)
    # A feed back within the caps clears the warning.
    (directory / "flood.ics").write_text(ONE_EVENT)
    sync_all()
    assert not Alarm.objects.filter(key=f"ical-capped:{zone.pk}", cleared_at__isnull=True).exists()


def test_the_soonest_occurrences_are_kept_over_the_cap(settings):
    settings.BMS_ICAL_MAX_OCCURRENCES = 50
    found = ical.expand_feed(flood(3).encode(), NOW, NOW + timedelta(days=1), ZoneInfo("UTC"))
    assert found.capped and len(found.occurrences) == 50
    starts = [o.start for o in found.occurrences]
    # Three events each minute from 09:00: the first 50 are 09:00 to 09:16.
    assert max(starts) == NOW + timedelta(minutes=16)


def test_the_event_cap(db, served, settings):
    settings.BMS_ICAL_MAX_EVENTS = 5
    directory, server = served
    events = "".join(
        f"BEGIN:VEVENT\nUID:e{i}\nSUMMARY:E{i}\nDTSTART:20260321T{10 + i:02d}0000Z\n"
        "DURATION:PT30M\nEND:VEVENT\n"
        for i in range(6)
    )
    (directory / "many.ics").write_text(
        f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//EN\n{events}END:VCALENDAR\n"
    )
    zone = Zone.objects.create(name="Hall", slug="hall", ical_url=server.url("many.ics"))
    counts = sync_zone(zone, now=NOW)
    assert counts == {"created": 5, "updated": 0, "cancelled": 0, "capped": 1}


def test_a_rule_from_1970_does_not_spin(settings):
    # Every minute since 1970: 29 million steps before the window. Walked within a budget.
    found = returns_within(
        lambda: ical.expand_feed(
            flood(1, dtstart="19700101T000000Z").encode(),
            NOW,
            NOW + timedelta(days=90),
            ZoneInfo("UTC"),
        ),
        60,
        "an expansion of a rule from 1970",
    )
    assert found.capped


def test_a_capped_feed_cancels_nothing_for_missing(db, served, settings):
    directory, server = served
    (directory / "feed.ics").write_text(ONE_EVENT)
    zone = Zone.objects.create(name="Hall", slug="hall", ical_url=server.url("feed.ics"))
    sync_zone(zone, now=NOW)
    settings.BMS_ICAL_MAX_OCCURRENCES = 10
    (directory / "feed.ics").write_text(flood(2))
    sync_zone(zone, now=NOW)
    assert Booking.objects.get(zone=zone, title="Choir").cancelled is False


# --- a person's cancellation survives the next sync ---------------------------------------------


def test_a_booker_cancelling_an_ical_booking_stays_cancelled(db, served, booker_api, booker):
    directory, server = served
    (directory / "feed.ics").write_text(ONE_EVENT)
    zone = Zone.objects.create(name="Hall", slug="hall", ical_url=server.url("feed.ics"))
    sync_zone(zone, now=NOW)
    booking = Booking.objects.get(zone=zone, source="ical")
    assert booker_api.delete(f"/api/v1/bookings/{booking.pk}").status_code == 204
    sync_zone(zone, now=NOW)
    again = Booking.objects.get(zone=zone, ical_uid=booking.ical_uid)
    assert again.pk == booking.pk
    assert again.cancelled and again.cancelled_by == booker.username


def test_the_feed_restores_what_it_cancelled(db, served):
    directory, server = served
    (directory / "feed.ics").write_text(ONE_EVENT)
    zone = Zone.objects.create(name="Hall", slug="hall", ical_url=server.url("feed.ics"))
    sync_zone(zone, now=NOW)
    (directory / "feed.ics").write_text(ONE_EVENT.replace("SUMMARY:Choir", "STATUS:CANCELLED"))
    sync_zone(zone, now=NOW)
    assert Booking.objects.get(zone=zone).cancelled_by == "iCal feed"
    (directory / "feed.ics").write_text(ONE_EVENT)
    assert sync_zone(zone, now=NOW)["updated"] == 1
    restored = Booking.objects.get(zone=zone)
    assert not restored.cancelled and restored.cancelled_by == ""


# --- the connection goes to the checked address --------------------------------------------
# control/ical_fetch.py opens its own connections (PinnedHTTPConnection.connect) so that a name
# resolving to a public address when checked cannot reach an inside one when fetched. These pin
# that on real servers: a name under .invalid resolves nowhere (RFC 6761), so a request can
# only arrive through the address it was pinned to, and that http.client sends on the socket
# the overridden connect() opened.


class _HostRecorder(http.server.BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_GET(self):
        _HostRecorder.hosts.append(self.headers["Host"])
        body = b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        return


@contextlib.contextmanager
def _recorder(tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """A real HTTP(S) server on 127.0.0.1 recording each request's Host header; yields its port."""
    _HostRecorder.hosts = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostRecorder)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _get(conn: ical_fetch.PinnedHTTPConnection) -> bytes:
    try:
        conn.request("GET", "/cal.ics")
        return conn.getresponse().read()
    finally:
        conn.close()


def test_the_request_goes_to_the_checked_address_and_names_the_host():
    with _recorder() as port:
        conn = ical_fetch.PinnedHTTPConnection("calendar.invalid", port, "127.0.0.1", timeout=5)
        assert _get(conn).startswith(b"BEGIN:VCALENDAR")
    assert _HostRecorder.hosts == [f"calendar.invalid:{port}"]


def test_tls_is_checked_against_the_host_name_not_the_address(tmp_path):
    make_ca_and_server_cert(tmp_path, san="DNS:calendar.invalid")  # no IP in the certificate
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(tmp_path / "server.pem", tmp_path / "server.key")
    client_side = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

    with _recorder(tls=server_side) as port:
        conn = ical_fetch.PinnedHTTPSConnection(
            "calendar.invalid", port, "127.0.0.1", timeout=5, context=client_side
        )
        assert _get(conn).startswith(b"BEGIN:VCALENDAR")

        other = ical_fetch.PinnedHTTPSConnection(
            "other.invalid", port, "127.0.0.1", timeout=5, context=client_side
        )
        with pytest.raises(ssl.SSLCertVerificationError):
            _get(other)
    assert _HostRecorder.hosts == [f"calendar.invalid:{port}"]
