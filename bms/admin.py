"""Admin amendments for the libraries bms wires in.

django-axes's "Clean up expired attempts" action fails with a 500 (axes 8.3.1 reads request
attributes that only its login handling sets); it is re-registered here with them set, and
with an explicit permission like every other admin action (tests/security/test_admin_actions.py).
"""

from __future__ import annotations

from axes.admin import AccessAttemptAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib import admin

admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class LoginAttemptAdmin(AccessAttemptAdmin):
    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request, queryset):
        AxesProxyHandler.update_request(request)
        return AccessAttemptAdmin.cleanup_expired_attempts(self, request, queryset)
