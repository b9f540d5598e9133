"""Issuing staff API tokens (django-rest-knox): one rule for every place that hands one out
(`manage.py create_api_token`, emoncms's /user/auth.json).

A user keeps at most BMS_API_TOKENS_PER_USER tokens: issuing one more deletes the oldest, so
tokens cannot pile up however often a client logs in. Expired tokens are deleted on the way.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from knox.models import AuthToken


def issue(user, days: int | None = None) -> tuple[AuthToken, str, int]:
    """(the stored token, the token text shown once, how many older tokens were deleted)."""
    days = settings.BMS_API_TOKEN_TTL_DAYS if days is None else days
    tokens = AuthToken.objects.filter(user=user)
    tokens.filter(expiry__lt=timezone.now()).delete()
    keep = settings.BMS_API_TOKENS_PER_USER - 1
    old = list(tokens.order_by("-created").values_list("digest", flat=True)[keep:])
    AuthToken.objects.filter(digest__in=old).delete()
    instance, token = AuthToken.objects.create(user=user, expiry=timedelta(days=days))
    return instance, token, len(old)
