"""Login lockout: django-axes in front of every password check (settings AXES_*).

After BMS_LOGIN_FAILURE_LIMIT wrong passwords for one username from one client IP (the IP as
core.throttle.client_ip sees it, so BMS_TRUSTED_PROXIES is honoured) that pair gets HTTP 429
for BMS_LOGIN_COOLOFF_MINUTES, and the password is not even hashed: a flood of guesses costs
one indexed query each instead of a PBKDF2 hash, and the kiosk stays fast.
"""

from __future__ import annotations

import ipaddress

from axes.backends import AxesStandaloneBackend
from django.conf import settings

from core import throttle


class LockoutBackend(AxesStandaloneBackend):
    """axes' backend, except that a check with no request (a management command, the test
    client's login()) passes through: only web logins carry an IP to count against, and every
    web login path (admin login, staff login, DRF) passes the request."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


# The lockout log's columns: a username field of 255 characters, an IP address field. What a
# caller types is cut to fit, or a login flood with long names is a 500 on PostgreSQL.
USERNAME_CHARS = 150  # Django's own limit: no longer name can be a user


def username_of(request, credentials: dict | None) -> str | None:
    """AXES_USERNAME_CALLABLE: the username tried, as axes reads it, cut to USERNAME_CHARS."""
    field = settings.AXES_USERNAME_FORM_FIELD
    if credentials:
        name = credentials.get(field)
    else:
        name = getattr(request, "data", request.POST).get(field)
    if not isinstance(name, str):
        return None
    return name.replace("\x00", "")[:USERNAME_CHARS]


def client_ip(request) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: core.throttle.client_ip (BMS_TRUSTED_PROXIES), if an address."""
    for candidate in (throttle.client_ip(request), request.META.get("REMOTE_ADDR", "")):
        try:
            return str(ipaddress.ip_address(candidate.strip()))
        except ValueError:
            continue
    return None  # no address at all (a request made in code): stored as unknown
