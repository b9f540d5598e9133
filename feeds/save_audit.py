"""Who changed a feed, kept by apps above feeds (feeds may not import them), as save_warnings.py
does for warnings: an app registers an auditor in its AppConfig.ready(); the feed API and admin
save through `audited_save`. Used by control: a feed shown on the site's BACnet device, or taken
off it, goes into the plant's change history (control/change_audit.py), as a zone's BACnet
write switches do.

An auditor is called with the feed as stored before the save (None: a new feed) and returns
what to do once it is saved, `finish(by, feed, door)`; both run in the save's transaction, so a
save refused or failed leaves no entry, and an entry that cannot be written undoes the save."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from feeds.models import Feed

API = "api"
ADMIN = "admin"

Finish = Callable[[AbstractBaseUser, Feed, str], object]
Auditor = Callable[[Feed | None], Finish]
_auditors: list[Auditor] = []


def register(auditor: Auditor) -> None:
    if auditor not in _auditors:
        _auditors.append(auditor)


def audited_save(
    by: AbstractBaseUser, before: Feed | None, save: Callable[[], Feed], door: str
) -> Feed:
    """`save()` the feed, each registered auditor told what it was (`before`, as stored: None
    for a new feed) and what it is, by whom and through which `door` (API, ADMIN)."""
    with transaction.atomic():
        stored = Feed.objects.filter(pk=before.pk).first() if before and before.pk else None
        finishers = [auditor(stored) for auditor in _auditors]
        feed = save()
        for finish in finishers:
            finish(by, feed, door)
    return feed
