"""API permissions by staff group (see core/roles.py).

engineers (and superusers): read and write everything;
bookers: read everything, write bookings;
viewers: read only. Anyone else: nothing.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from core.roles import BOOKERS, ENGINEERS, ROLE_GROUPS


def user_groups(user) -> set[str]:
    if not user or not user.is_authenticated:
        return set()
    cached = getattr(user, "_bms_groups", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True))
        user._bms_groups = cached
    return cached


def has_staff_role(user) -> bool:
    """Superuser, or in one of the role groups: may see staff pages and every feed."""
    return bool(user and user.is_authenticated and (user.is_superuser or user_groups(user)))


def is_engineer(user) -> bool:
    return bool(
        user and user.is_authenticated and (user.is_superuser or ENGINEERS in user_groups(user))
    )


class GroupPermission(BasePermission):
    message = "You need to log in as staff in the engineers, bookers or viewers group."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if is_engineer(user):
            return True
        groups = user_groups(user)
        if not groups:
            return False
        if request.method in SAFE_METHODS:
            return True
        if BOOKERS in groups and getattr(view, "bookers_may_write", False):
            return True
        self.message = "Your role may only read this."
        return False
