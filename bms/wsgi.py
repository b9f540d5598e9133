"""WSGI entry point (gunicorn bms.wsgi).

The ingest endpoints (a node posts many times a second) go to sensors/ingest/wsgi.py: Django's
own handler with only the middleware they use; everything else to Django's full stack."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings")
django_application = get_wsgi_application()  # sets Django up, so the URL conf can be read

from sensors.ingest.wsgi import IngestHandler  # noqa: E402  (needs Django set up)

ingest_application = IngestHandler()


def application(environ, start_response):
    if ingest_application.handles(environ):
        return ingest_application(environ, start_response)
    return django_application(environ, start_response)
