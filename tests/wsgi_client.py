"""A Django test Client that sends its requests through the site's real WSGI application
(bms.wsgi.application), as gunicorn does.

Django's own test Client calls its own handler and never passes through bms/wsgi.py, so it
would test the ingest views behind Django's full middleware stack while production reaches them
through sensors/ingest/wsgi.py. With this client (the `client` fixture, tests/conftest.py, and
the ingest tests' own clients) a request that bms.wsgi sends to the lean ingest handler is run
through bms.wsgi.application itself, so what the tests assert (status, body, headers,
throttling) holds for the path production uses. Every other request goes to Django's test
handler as before (the same full stack that bms.wsgi hands it to, with the test client's CSRF
bypass and template capture).
"""

from __future__ import annotations

from django.core.handlers.wsgi import WSGIRequest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import HttpResponse
from django.test import Client
from django.test.client import ClientHandler


class WsgiApplicationHandler:
    """Stands in for Django's ClientHandler: an ingest request runs through the WSGI
    application and what it sends back becomes an HttpResponse for the Client's assertions."""

    def __init__(self, django_test_handler: ClientHandler) -> None:
        self.django_test_handler = django_test_handler

    def __call__(self, environ: dict) -> HttpResponse:
        from bms.wsgi import application, ingest_application

        if not ingest_application.handles(environ):
            return self.django_test_handler(environ)

        sent: dict = {}

        def start_response(status: str, headers: list, exc_info=None) -> None:
            sent["status"], sent["headers"] = status, headers

        request = WSGIRequest(dict(environ))  # only for response.wsgi_request
        # As Django's ClientHandler: the test's database connection (inside the test's
        # transaction) must not be closed by the request signals. What the lean path does with
        # connections between requests is tested against a real gunicorn
        # (tests/reliability/test_database_outage.py).
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            chunks = application(environ, start_response)
            try:
                body = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()  # as a WSGI server: fires request_finished
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
        response = HttpResponse(body, status=int(sent["status"].split(" ", 1)[0]))
        del response["Content-Type"]
        for name, value in sent["headers"]:
            if name.lower() == "set-cookie":
                response.cookies.load(value)
            else:
                response[name] = value
        response.wsgi_request = request
        return response


class WsgiClient(Client):
    def __init__(self, **defaults) -> None:
        super().__init__(**defaults)
        self.handler = WsgiApplicationHandler(self.handler)
