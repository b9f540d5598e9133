"""Make sure the local admin login exists (scripts/run-site.sh runs this on every start).

The password is set only when the user is created, or when asked to (`--reset`, which
run-site.sh passes when it has just written a new password file). Setting it on every start
changed the password hash, which Django folds into each session: every start logged every
admin out.
"""

from __future__ import annotations

import os

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

MAX_PASSWORD_CHARS = 256


class Command(BaseCommand):
    help = "Create the admin superuser if missing; set its password only on creation or --reset."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--password-env",
            default="DJANGO_SUPERUSER_PASSWORD",
            help="Environment variable holding the password (kept off the command line).",
        )
        parser.add_argument(
            "--reset", action="store_true", help="Set the password even if the user exists."
        )

    def handle(self, *args, username: str, password_env: str, reset: bool, **options) -> None:
        password = os.environ.get(password_env, "")
        if not password or len(password) > MAX_PASSWORD_CHARS:
            raise CommandError(
                f"{password_env} must hold a password of 1-{MAX_PASSWORD_CHARS} chars"
            )
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@localhost"}
        )
        fields = []
        if not (user.is_staff and user.is_superuser):
            user.is_staff = user.is_superuser = True
            fields += ["is_staff", "is_superuser"]
        if created or reset:
            user.set_password(password)
            fields.append("password")
        if fields:
            user.save(update_fields=fields)
        action = "created" if created else ("password reset" if reset else "unchanged")
        if options["verbosity"] > 0:
            self.stdout.write(f"admin user '{username}': {action}")
