"""Open BMS project package: settings, URL wiring, the Celery app."""

from bms.celery import app as celery_app

__all__ = ["celery_app"]
