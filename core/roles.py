"""Staff roles as Django groups, created after every migrate.

engineers: everything; bookers: bookings only; viewers: read only.
API permissions are enforced by core.permissions.GroupPermission, admin by these groups'
model permissions, so both agree.
"""

from __future__ import annotations

from django.db.models.signals import post_migrate
from django.dispatch import receiver

ENGINEERS = "engineers"
BOOKERS = "bookers"
VIEWERS = "viewers"
ROLE_GROUPS = (ENGINEERS, BOOKERS, VIEWERS)
OUR_APPS = ("sensors", "feeds", "alarms", "control", "energy", "findings", "displays")


@receiver(post_migrate)
def ensure_role_groups(sender, **_kwargs) -> None:
    from django.contrib.auth.models import Group, Permission

    if getattr(sender, "name", None) != "displays":
        return  # run once, after the last of our apps is migrated
    ours = Permission.objects.filter(content_type__app_label__in=OUR_APPS)
    engineers, _ = Group.objects.get_or_create(name=ENGINEERS)
    engineers.permissions.set(ours)
    viewers, _ = Group.objects.get_or_create(name=VIEWERS)
    viewers.permissions.set(ours.filter(codename__startswith="view_"))
    bookers, _ = Group.objects.get_or_create(name=BOOKERS)
    bookers.permissions.set(
        ours.filter(codename__startswith="view_") | ours.filter(content_type__model="booking")
    )
