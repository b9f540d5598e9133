"""Admin amendments for the libraries bms wires in.

django-axes's "Clean up expired attempts" action fails with a 500 (axes 8.3.1 reads request
attributes that only its login handling sets); it is re-registered here with them set, and
with an explicit permission like every other admin action (tests/security/test_admin_actions.py).
Users and groups get core.choice_fields.BoundedIdsAdmin like every admin with a multiple choice.
"""

from __future__ import annotations

from axes.admin import AccessAttemptAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User

from core.choice_fields import BoundedIdsAdmin

admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class LoginAttemptAdmin(AccessAttemptAdmin):
    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request, queryset):
        AxesProxyHandler.update_request(request)
        return AccessAttemptAdmin.cleanup_expired_attempts(self, request, queryset)


# Users' groups and permissions are multiple choices like ours: an id past 64 bits is
# "Select a valid choice", not a 500 from the database driver (core/choice_fields.py).
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class BoundedUserAdmin(BoundedIdsAdmin, UserAdmin):
    pass


@admin.register(Group)
class BoundedGroupAdmin(BoundedIdsAdmin, GroupAdmin):
    pass
