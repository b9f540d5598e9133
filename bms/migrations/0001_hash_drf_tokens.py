"""Hash the staff API tokens DRF's authtoken kept in clear, and empty its table.

Each old key becomes a knox token (SHA-512 digest, lookup prefix, expiry BMS_API_TOKEN_TTL_DAYS
from now), so scripts keep working with the key they have. rest_framework.authtoken is no
longer installed; its table is read by name where an older install has it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import migrations
from django.utils import timezone

OLD_TABLE = "authtoken_token"


def hash_clear_tokens(apps, schema_editor) -> int:
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS, knox_settings

    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return 0
    AuthToken = apps.get_model("knox", "AuthToken")
    table = connection.ops.quote_name(OLD_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id FROM {table}")
        rows = cursor.fetchall()
    expiry = timezone.now() + knox_settings.TOKEN_TTL
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
