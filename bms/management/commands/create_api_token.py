"""`manage.py create_api_token <username>`: a new staff API token, printed once.

Only its hash is stored, so it cannot be shown again. It expires after BMS_API_TOKEN_TTL_DAYS
(or --days). A user keeps at most BMS_API_TOKENS_PER_USER tokens: the oldest go first.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from knox.models import AuthToken

from core import api_tokens

MAX_DAYS = 3650


class Command(BaseCommand):
    help = __doc__.split("\n\n")[0]

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--days", type=int, default=None, help="Lifetime in days")
        parser.add_argument(
            "--revoke-all", action="store_true", help="Delete the user's tokens, issue none"
        )

    def handle(self, *args, **opts) -> None:
        try:
            user = get_user_model().objects.get(username=opts["username"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named '{opts['username']}'.") from None
        tokens = AuthToken.objects.filter(user=user)
        if opts["revoke_all"]:
            count, _ = tokens.delete()
            self.stdout.write(f"Deleted {count} token(s) of {user.username}.")
            return
        days = opts["days"] if opts["days"] is not None else settings.BMS_API_TOKEN_TTL_DAYS
        if not 1 <= days <= MAX_DAYS:
            raise CommandError(f"--days must be between 1 and {MAX_DAYS}.")
        instance, token, deleted = api_tokens.issue(user, days)
        self.stdout.write(
            f"API token for {user.username}, expires {instance.expiry:%Y-%m-%d %H:%M %Z}"
            + (f" ({deleted} older token(s) deleted)" if deleted else "")
            + ". Shown only once:"
        )
        self.stdout.write(token)
