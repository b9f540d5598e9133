"""Step 0 of ingest, in the web: the WSGI entry of the ingest endpoints, ahead of Django's full
middleware stack.

A node posts hundreds of times a second on a busy site, and most of what Django does per request
is for pages and the staff API: sessions, CSRF, users, messages, static files, the login
lockout, then the URL resolver walking every app's routes. None of it is used by the ingest
views (sensors/ingest/views.py: a node key, no cookie, csrf_exempt). bms/wsgi.py hands the
ingest paths to `IngestHandler`, which is Django's own WSGIHandler (the same request object,
request_started/request_finished signals and so database connection handling, error
responses and `django.request` logging) with a shorter middleware chain and a fixed route:

- the middleware that still runs is every entry of settings.MIDDLEWARE except NOT_ON_INGEST:
  the security headers (SecurityMiddleware, XFrameOptionsMiddleware), the ALLOWED_HOSTS check
  and the HTTPS redirect in production come from the same classes and settings as on every
  other page, and a middleware added to the settings later runs here too unless it is listed;
- the route is the path → view table of the URL conf itself (`ingest_routes`), so the views
  and their paths are defined once (sensors/urls.py, sensors/api_urls.py).

What the lean path saves is measured in docs/BENCHMARKS.md, section "Streams".
"""

from __future__ import annotations

import io
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve, reverse
from django.utils.module_loading import import_string

# Middleware with nothing to do for an ingest view, skipped on the ingest paths. Why each:
NOT_ON_INGEST = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",  # serves STATIC_URL only
        "django.contrib.sessions.middleware.SessionMiddleware",  # no session: a node key
        "django.middleware.csrf.CsrfViewMiddleware",  # the ingest views are csrf_exempt
        "django.contrib.auth.middleware.AuthenticationMiddleware",  # no request.user
        "django.contrib.messages.middleware.MessageMiddleware",  # no pages, no messages
        "axes.middleware.AxesMiddleware",  # the login lockout: login views only
    }
)

# The URL names of the ingest views (sensors/urls.py, sensors/api_urls.py).
INGEST_URL_NAMES = ("readings", "input-post", "input-post-json", "input-bulk", "input-bulk-json")

View = Callable[[HttpRequest], HttpResponse]


def ingest_routes() -> dict[str, View]:
    """path → view for the ingest endpoints, read from the URL conf: each named route's path,
    and the same with a trailing slash when the URL conf sends that to the same view."""
    routes: dict[str, View] = {}
    for name in INGEST_URL_NAMES:
        path = reverse(name)
        for candidate in (path, path.rstrip("/") + "/"):
            try:
                match = resolve(candidate)
            except Resolver404:
                continue
            if match.url_name == name and not match.args and not match.kwargs:
                routes[candidate] = match.func
    return routes


def read_chunked_body(environ: dict, limit: int) -> None:
    """Give a chunked request body a length Django can read.

    Django reads CONTENT_LENGTH bytes of a body, and a request sent with
    `Transfer-Encoding: chunked` has none: its body read as empty ("empty body", "cb: truncated
    zlib data"), though emoncms takes it and some HTTP libraries send it (requests with a
    generator body; found by an outside check). Gunicorn decodes the chunks and marks the input
    `wsgi.input_terminated` (read to its end safely); such a body is read here, at most
    `limit` + 1 bytes, so one more than the limit is the view's 413, never memory without end.
    """
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    if not chunked or environ.get("CONTENT_LENGTH") or not environ.get("wsgi.input_terminated"):
        return
    body = environ["wsgi.input"].read(limit + 1)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))


class IngestHandler(WSGIHandler):
    """Django's WSGI handler for the ingest paths only: a shorter middleware chain, no URL
    resolving per request (`routes` was read from the URL conf at start)."""

    def __init__(self) -> None:
        self.routes = ingest_routes()
        super().__init__()

    def load_middleware(self, is_async: bool = False) -> None:
        # As BaseHandler.load_middleware, for the middleware the ingest views need. Only the
        # process_request/process_response kind is supported: a middleware with view,
        # template-response or exception hooks would need the full handler, so it is refused
        # at start rather than silently skipped.
        #
        # Django internals, knowingly: Django documents no way to run a different middleware
        # set for some paths (its documented entry, get_wsgi_application(), always builds
        # settings.MIDDLEWARE in full), and writing our own WSGI handler would copy far more
        # of it (request objects, signals, error responses, logging, response closing). So
        # this relies on exactly two things, pinned by
        # tests/sensors/test_ingest_wsgi.py::test_djangos_handler_internals_the_lean_path_uses:
        # WSGIHandler() builds its chain by calling self.load_middleware(), and get_response()
        # runs self._middleware_chain(request). Django's per-hook lists (_view_middleware and
        # the like) are read only by its own inner _get_response, which this chain never
        # reaches (its innermost handler is self._route), so they are not set.
        handler = convert_exception_to_response(self._route)
        for path in reversed(settings.MIDDLEWARE):
            if path in NOT_ON_INGEST:
                continue
            middleware = import_string(path)(handler)
            for hook in ("process_view", "process_template_response", "process_exception"):
                if hasattr(middleware, hook):
                    raise ImproperlyConfigured(
                        f"{path} has {hook}: add it to sensors.ingest.wsgi.NOT_ON_INGEST if the "
                        "ingest views do not need it, or route ingest through the full handler"
                    )
            handler = convert_exception_to_response(middleware)
        self._middleware_chain = handler

    def __call__(self, environ: dict, start_response):
        read_chunked_body(environ, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 1_048_576)
        return super().__call__(environ, start_response)

    def _route(self, request: HttpRequest) -> HttpResponse:
        return self.routes[request.path_info](request)

    def handles(self, environ: dict) -> bool:
        return environ.get("PATH_INFO", "") in self.routes
