"""Login lockout: django-axes in front of every password check (settings AXES_*).

After BMS_LOGIN_FAILURE_LIMIT wrong passwords for one username from one client IP (the IP as
core.throttle.client_ip sees it, so BMS_TRUSTED_PROXIES is honoured) that pair gets HTTP 429
for BMS_LOGIN_COOLOFF_MINUTES, and the password is not even hashed: a flood of guesses costs
one indexed query each instead of a PBKDF2 hash, and the kiosk stays fast.

Per address, whatever the username (second red-team round, #25): a client cycling usernames
never met the per-pair limit, and Django hashes a password for an unknown user too (194 ms
each). After BMS_LOGIN_IP_FAILURE_LIMIT wrong logins from one client IP within
BMS_LOGIN_COOLOFF_MINUTES, every login from that IP gets 429 unchecked until the oldest of
them ages out; other addresses are not affected. Counted from axes' own records of failures
(one indexed query), so there is no second store to keep in step.
"""

from __future__ import annotations

import ipaddress

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from core import throttle


class LockoutBackend(AxesStandaloneBackend):
    """axes' backend, except that a check with no request (a management command, the test
    client's login()) passes through: only web logins carry an IP to count against, and every
    web login path (admin login, staff login, DRF) passes the request."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        if address_locked_out(request):
            # As axes does for a locked pair: its signal handler records the attempt (so an
            # address that keeps trying stays locked) and its middleware (or the emoncms auth
            # view) answers 429.
            request.axes_locked_out = True
            raise AxesBackendPermissionDenied("too many failed logins from this address")
        return super().authenticate(request, username=username, password=password, **kwargs)


def address_failures(ip: str | None) -> int:
    """Wrong logins from `ip` within the cool-off, summed over every username tried."""
    if ip is None:
        return 0
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    recent = AccessAttempt.objects.filter(ip_address=ip, attempt_time__gte=since)
    return recent.aggregate(n=Sum("failures_since_start"))["n"] or 0


def address_locked_out(request) -> bool:
    return address_failures(client_ip(request)) >= settings.BMS_LOGIN_IP_FAILURE_LIMIT


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
