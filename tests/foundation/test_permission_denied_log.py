"""A refused permission is logged as one line, without a traceback (core/log_denied.py)."""

import io
import logging

import pytest

from alarms.models import Alarm
from core.log_denied import PermissionDeniedOneLine


@pytest.fixture
def console_log():
    """What the site's console handler (settings.LOGGING) writes during the test."""
    handler = next(
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, PermissionDeniedOneLine) for f in h.filters)
    )
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


@pytest.mark.django_db
def test_a_viewer_refused_an_engineers_button_is_one_line_without_traceback(
    client, viewer, console_log
):
    alarm = Alarm.objects.create(key="k", message="m", source="test")
    client.force_login(viewer)
    console_log.seek(0)
    console_log.truncate()  # the login's own lines
    response = client.post(f"/staff/alarms/{alarm.pk}/acknowledge")
    assert response.status_code == 403
    text = console_log.getvalue()
    assert "Forbidden (Permission denied)" in text
    assert "Traceback" not in text and "Only engineers" not in text
    assert len(text.strip().splitlines()) == 1


@pytest.mark.django_db
def test_a_real_error_keeps_its_traceback(console_log):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("bms.test").exception("failed")
    assert "Traceback" in console_log.getvalue()
