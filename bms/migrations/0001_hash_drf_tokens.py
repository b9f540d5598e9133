"""Hash the staff API tokens DRF's authtoken kept in clear, and empty its table.

Each old key becomes a knox token (SHA-512 digest, lookup prefix, expiry BMS_API_TOKEN_TTL_DAYS
from now), so scripts keep working with the key they have. rest_framework.authtoken is no
longer installed; its table is read by name where an older install has it.

knox documents how to create a token (`AuthToken.objects.create`, which makes a new random
one) but not how to store a token that already exists, and keeping the old keys working is the
point. So, for the older installs only, this uses two knox internals: `knox.crypto.hash_token`
(its storage digest, after the documented SECURE_HASH_ALGORITHM) and
`CONSTANTS.TOKEN_KEY_LENGTH` (the lookup prefix). A fresh install, with no old table, returns
before importing either. tests/security/test_api_tokens.py pins the behaviour relied on: a key
stored this way authenticates through knox's own TokenAuthentication, and no key stays in clear.
"""

from __future__ import annotations

from django.conf import settings
from django.db import migrations
from django.utils import timezone

OLD_TABLE = "authtoken_token"


def hash_clear_tokens(apps, schema_editor) -> int:
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return 0  # a fresh install: nothing in clear to convert
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    AuthToken = apps.get_model("knox", "AuthToken")
    table = connection.ops.quote_name(OLD_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id FROM {table}")
        rows = cursor.fetchall()
    expiry = timezone.now() + settings.REST_KNOX["TOKEN_TTL"]  # as new tokens get (bms/settings.py)
    AuthToken.objects.bulk_create(
        [
            AuthToken(
                digest=hash_token(key),
                token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH],
                user_id=user_id,
                expiry=expiry,
            )
            for key, user_id in rows
        ],
        ignore_conflicts=True,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")
    return len(rows)


class Migration(migrations.Migration):
    dependencies = [
        ("knox", "0009_extend_authtoken_field"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]
    operations = [migrations.RunPython(hash_clear_tokens, migrations.RunPython.noop)]
