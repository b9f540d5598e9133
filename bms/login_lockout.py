"""Login lockout: django-axes in front of every password check (settings AXES_*).

After BMS_LOGIN_FAILURE_LIMIT wrong passwords for one username from one client IP (the IP as
bms.throttle.client_ip sees it, so BMS_TRUSTED_PROXIES is honoured) that pair gets HTTP 429
for BMS_LOGIN_COOLOFF_MINUTES, and the password is not even hashed: a flood of guesses costs
one indexed query each instead of a PBKDF2 hash, and the kiosk stays fast.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class LockoutBackend(AxesStandaloneBackend):
    """axes' backend, except that a check with no request (a management command, the test
    client's login()) passes through: only web logins carry an IP to count against, and every
    web login path (admin login, staff login, DRF) passes the request."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
