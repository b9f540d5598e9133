"""The lean WSGI path of the ingest endpoints (sensors/ingest/wsgi.py, routed by bms/wsgi.py).

Requests are sent to bms.wsgi.application itself, as gunicorn does (no test client): the lean
path must answer exactly as Django's full stack would, headers included, and refuse what the
full stack refuses (a Host not in ALLOWED_HOSTS, plain HTTP when HTTPS is required).
"""

from __future__ import annotations

import io
import json
import zlib

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import HttpResponse
from django.test import RequestFactory

from bms import wsgi
from sensors.ingest import wsgi as ingest_wsgi
from sensors.ingest.wsgi import IngestHandler, ingest_routes
from tests.sensors.conftest import queued_batches

pytestmark = pytest.mark.django_db

INGEST_PATHS = {
    "/api/v1/readings",
    "/api/v1/readings/",
    "/input/post",
    "/input/post.json",
    "/input/bulk",
    "/input/bulk.json",
}
# Set by Django's SecurityMiddleware and XFrameOptionsMiddleware on every response of the site.
SECURITY_HEADERS = ("X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy",
                    "Cross-Origin-Opener-Policy")  # fmt: skip


@pytest.fixture(autouse=True)
def _keep_test_connection():
    # As Django's test client: the test's transaction must survive the request signals.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def call(app, method: str, path: str, body: bytes = b"", headers: dict | None = None, **extra):
    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json" if body else "", "CONTENT_LENGTH": str(len(body)),
        "SERVER_NAME": "testserver", "SERVER_PORT": "80", "HTTP_HOST": "testserver",
        "REMOTE_ADDR": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http", "wsgi.errors": io.StringIO(),
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()},
        **extra,
    }  # fmt: skip
    sent = {}

    def start_response(status, response_headers, exc_info=None):
        sent["status"] = int(status.split(" ", 1)[0])
        sent["headers"] = dict(response_headers)

    chunks = app(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        chunks.close()
    return sent["status"], sent["headers"], content


def test_the_ingest_paths_are_read_from_the_url_conf():
    assert set(ingest_routes()) == INGEST_PATHS
    assert set(wsgi.ingest_application.routes) == INGEST_PATHS


def test_other_paths_go_to_djangos_full_stack(monkeypatch):
    lean_calls = []
    real = IngestHandler.__call__
    monkeypatch.setattr(
        IngestHandler, "__call__", lambda self, *a: lean_calls.append(1) or real(self, *a)
    )
    status, _, _ = call(wsgi.application, "GET", "/healthz")
    assert status in (200, 503)  # the probe itself; what matters is who answered
    # a near miss of an ingest path: Django's answer (APPEND_SLASH, 404), not the lean path's
    status, _, _ = call(wsgi.application, "POST", "/input/bulk/")
    assert status == 404
    assert lean_calls == []
    call(wsgi.application, "POST", "/input/bulk")
    assert lean_calls == [1]


def test_accepted_and_refused_posts_carry_the_sites_security_headers(node_and_key, redis_client):
    node, key = node_and_key
    _, page_headers, _ = call(wsgi.application, "GET", "/healthz")
    body = json.dumps({"values": {"power": 1.5}}).encode()
    auth = {"Authorization": f"Bearer {key}"}
    answers = [
        call(wsgi.application, "POST", "/api/v1/readings", body, auth),
        call(wsgi.application, "POST", "/api/v1/readings", body),  # 401
        call(wsgi.application, "GET", "/api/v1/readings"),  # 405
        call(
            wsgi.application, "POST", "/input/post", b"", auth, QUERY_STRING="node=emontx1&json=a:1"
        ),  # fmt: skip
    ]
    assert [status for status, _, _ in answers] == [202, 401, 405, 200]
    for _, headers, _ in answers:
        for name in SECURITY_HEADERS:
            assert headers.get(name) == page_headers[name], name
        assert "Set-Cookie" not in headers and "Vary" not in headers  # no session, no user
    assert json.loads(answers[0][2]) == {"success": True, "rows": 1, "values": 1}
    assert json.loads(answers[1][2])["field"] == "apikey"
    assert [rows for _, rows in queued_batches(redis_client)] == [
        [[pytest.approx(0, abs=2e9), {"power": 1.5}]],
        [[pytest.approx(0, abs=2e9), {"a": 1}]],
    ]


def test_a_host_not_allowed_is_refused_as_on_every_page(node_and_key, redis_client):
    _, key = node_and_key
    body = json.dumps({"values": {"power": 1}}).encode()
    status, _, content = call(
        wsgi.application, "POST", "/api/v1/readings", body,
        {"Authorization": f"Bearer {key}", "Host": "evil.example"},
    )  # fmt: skip
    assert status == 400
    # JSON naming the header, as every other refusal (was Django's HTML "Bad Request (400)")
    assert json.loads(content) == {
        "success": False, "error": "Host: 'evil.example' is not a host this site answers to",
        "field": "Host",
    }  # fmt: skip
    assert queued_batches(redis_client) == []
    status, headers, _ = call(wsgi.application, "GET", "/staff/", headers={"Host": "evil.example"})
    assert status == 400 and headers["Content-Type"].startswith("text/html")  # pages: HTML


def test_https_required_redirects_before_the_view(node_and_key, redis_client, settings):
    _, key = node_and_key
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    app = IngestHandler()  # the middleware reads its settings when the handler starts
    body = json.dumps({"values": {"power": 1}}).encode()
    auth = {"Authorization": f"Bearer {key}"}
    status, headers, _ = call(app, "POST", "/api/v1/readings", body, auth)
    assert status == 301 and headers["Location"].startswith("https://testserver/api/v1/readings")
    assert queued_batches(redis_client) == []
    status, headers, _ = call(
        app, "POST", "/api/v1/readings", body, auth, **{"wsgi.url_scheme": "https"}
    )
    assert status == 202
    assert headers["Strict-Transport-Security"] == "max-age=3600"


class ViewHookMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        return None


def test_a_middleware_the_lean_path_cannot_run_is_refused_at_start(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.ViewHookMiddleware"]
    with pytest.raises(ImproperlyConfigured, match="ViewHookMiddleware has process_view"):
        IngestHandler()


class StampMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response["X-Stamp"] = "yes"
        return response


def test_a_middleware_added_later_runs_on_the_ingest_paths_too(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.StampMiddleware"]
    status, headers, _ = call(IngestHandler(), "GET", "/api/v1/readings")
    assert status == 405 and headers["X-Stamp"] == "yes"


def _chunked(body: bytes) -> dict:
    # As gunicorn hands a chunked request to the application: the chunks decoded, no
    # Content-Length, the input marked as ending where the body ends.
    return {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": "", "wsgi.input_terminated": True,
            "wsgi.input": io.BytesIO(body)}  # fmt: skip


def test_a_chunked_body_is_read(node_and_key, redis_client):
    """Found by an outside check: `Transfer-Encoding: chunked` bodies read as empty on every
    ingest path ("empty body", "cb: truncated zlib data"), though emoncms takes them."""
    node, key = node_and_key
    body = json.dumps({"values": {"t": 21.5}}).encode()
    status, _h, content = call(wsgi.application, "POST", "/api/v1/readings", body,
                               {"Authorization": f"Bearer {key}"}, **_chunked(body))  # fmt: skip
    assert status == 202, content
    bulk = zlib.compress(b"[[0,%d,1,2]]" % node.node_id)
    status, _h, content = call(
        wsgi.application, "POST", "/input/bulk.json", bulk, {"Authorization": f"Bearer {key}"},
        QUERY_STRING="cb=1&sentat=0", **_chunked(bulk),
    )  # fmt: skip
    assert (status, content) == (200, b"ok")
    assert [n for n, _rows in queued_batches(redis_client)] == [node.pk, node.pk]


def test_a_chunked_body_over_the_limit_is_a_413_read_no_further(node_and_key, settings):
    _node, key = node_and_key
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    stream = io.BytesIO(b'{"values": {"t": 1}, "pad": "' + b"x" * 5000 + b'"}')
    extra = {**_chunked(b""), "wsgi.input": stream}
    status, _h, content = call(wsgi.application, "POST", "/api/v1/readings", b"x",
                               {"Authorization": f"Bearer {key}"}, **extra)  # fmt: skip
    assert status == 413 and json.loads(content)["field"] == "body"
    assert stream.tell() == 1001  # the limit + 1 bytes, not the whole body


def test_djangos_handler_internals_the_lean_path_uses():
    """IngestHandler swaps Django's middleware chain for its own (no documented interface runs
    another middleware set for some paths). It relies on two undocumented facts of Django's
    handler, pinned here so an upgrade that changes them fails this test, not production:
    WSGIHandler() calls load_middleware() to build the chain, and get_response() runs
    self._middleware_chain(request)."""
    seen = []

    class Probe(WSGIHandler):
        def load_middleware(self, is_async: bool = False) -> None:
            seen.append("load_middleware")
            self._middleware_chain = lambda request: (
                seen.append(request.path) or HttpResponse(b"probe")
            )

    response = Probe().get_response(RequestFactory().get("/probe"))
    assert seen == ["load_middleware", "/probe"]
    assert response.content == b"probe"


def test_a_middleware_left_out_does_not_run_on_the_ingest_paths(settings, monkeypatch):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.StampMiddleware"]
    monkeypatch.setattr(
        ingest_wsgi, "NOT_ON_INGEST", ingest_wsgi.NOT_ON_INGEST | {f"{__name__}.StampMiddleware"}
    )
    status, headers, _ = call(IngestHandler(), "GET", "/api/v1/readings")
    assert status == 405 and "X-Stamp" not in headers
    assert all(name in headers for name in SECURITY_HEADERS)


def test_a_view_that_fails_is_djangos_500_with_the_sites_headers(caplog):
    """An exception in an ingest view is answered as Django's full stack answers it: a 500,
    logged on `django.request`, the security middleware's headers still set."""
    handler = IngestHandler()

    def broken(request):
        raise RuntimeError("the view broke")

    handler.routes = {path: broken for path in handler.routes}
    with caplog.at_level("ERROR", logger="django.request"):
        status, headers, _ = call(handler, "POST", "/api/v1/readings", b"{}")
    assert status == 500
    assert all(name in headers for name in SECURITY_HEADERS)
    assert any("the view broke" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
