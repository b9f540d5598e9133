"""Staff API tokens are stored hashed and expire.

DRF's authtoken kept every token in clear and forever. Now django-rest-knox keeps a SHA-512
digest and an expiry; `manage.py create_api_token` prints a token once; tokens an older install
had are hashed by migration bms 0001 and keep working (docs/API.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

OLD_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # the example key of DRF's docs


def _create(username: str, *args: str) -> str:
    out = StringIO()
    call_command("create_api_token", username, *args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _get(token: str, path: str = "/api/v1/zones"):
    return APIClient().get(path, HTTP_AUTHORIZATION=f"Token {token}")


@dataclass
class _Editor:
    """What the migration uses of its schema editor (a real one cannot open inside a test's
    transaction on SQLite)."""

    connection: object


def _all_stored_text() -> str:
    rows = AuthToken.objects.values_list("digest", "token_key")
    return " ".join(" ".join(row) for row in rows)


def test_a_created_token_works_and_only_its_hash_is_stored(engineer):
    token = _create("engineer")
    assert len(token) == 64
    assert _get(token).status_code == 200
    stored = AuthToken.objects.get(user=engineer)
    assert token not in _all_stored_text()  # only the digest and a 15-character lookup prefix
    assert stored.token_key == token[:15] and len(stored.digest) == 128
    days = settings.BMS_API_TOKEN_TTL_DAYS
    assert abs(stored.expiry - (timezone.now() + timedelta(days=days))) < timedelta(minutes=1)


def test_an_expired_token_is_refused_and_deleted(engineer):
    token = _create("engineer", "--days", "1")
    AuthToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    response = _get(token)
    assert response.status_code == 401
    assert not AuthToken.objects.exists()


def test_the_emoncms_apikey_parameter_takes_the_same_tokens(viewer):
    from feeds.models import Feed

    feed = Feed.objects.create(name="private", tag="t", interval=10)
    token = _create("viewer")
    client = APIClient()
    url = "/feed/timevalue.json"
    assert client.get(url, {"id": feed.pk, "apikey": token}).status_code != 401
    AuthToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    assert client.get(url, {"id": feed.pk, "apikey": token}).status_code == 401


def test_a_user_keeps_at_most_the_configured_number_of_tokens(engineer, settings):
    settings.BMS_API_TOKENS_PER_USER = 3
    tokens = [_create("engineer") for _ in range(5)]
    assert AuthToken.objects.filter(user=engineer).count() == 3
    assert [_get(t).status_code for t in tokens] == [401, 401, 200, 200, 200]


@pytest.mark.parametrize("days", ["0", "3651", "-1"])
def test_the_lifetime_is_bounded(engineer, days):
    with pytest.raises(CommandError, match="--days"):
        _create("engineer", "--days", days)
    assert not AuthToken.objects.exists()


def test_revoke_all_and_unknown_user(engineer):
    token = _create("engineer")
    call_command("create_api_token", "engineer", "--revoke-all", stdout=StringIO())
    assert _get(token).status_code == 401
    with pytest.raises(CommandError, match="No user"):
        _create("nobody")


def test_a_token_of_a_user_whose_role_was_removed_reads_nothing(engineer):
    token = _create("engineer")
    engineer.groups.clear()
    assert _get(token).status_code == 403


@pytest.mark.parametrize("bad", ["x" * 5000, "é" * 64, OLD_KEY + "g"])
def test_malformed_tokens_are_a_401(engineer, bad):
    _create("engineer")
    assert _get(bad).status_code == 401


def test_clear_tokens_of_an_older_install_are_hashed_and_keep_working(engineer, viewer):
    """An install upgraded from DRF's authtoken: its table holds keys in clear. The migration
    stores them with knox internals (no documented knox call stores a given key): this pins
    that knox's own authentication still takes a key stored that way."""
    migration = importlib.import_module("bms.migrations.0001_hash_drf_tokens")
    from django.apps import apps

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp "
            "with time zone NOT NULL, user_id integer NOT NULL)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token VALUES (%s, %s, %s), (%s, %s, %s)",
            [OLD_KEY, timezone.now(), engineer.pk, "ab" * 20, timezone.now(), viewer.pk],
        )
    assert migration.hash_clear_tokens(apps, _Editor(connection)) == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0  # no key left in clear
    assert OLD_KEY not in _all_stored_text()
    assert _get(OLD_KEY).status_code == 200
    assert _get("ab" * 20).status_code == 200
    assert AuthToken.objects.get(user=engineer).expiry > timezone.now() + timedelta(days=1)


def test_a_fresh_install_has_no_old_table_to_convert(db):
    migration = importlib.import_module("bms.migrations.0001_hash_drf_tokens")
    from django.apps import apps

    assert migration.hash_clear_tokens(apps, _Editor(connection)) == 0
