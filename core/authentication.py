"""Staff API tokens: django-rest-knox, which stores only a SHA-512 hash and an expiry.

`Authorization: Token <token>` as before (docs/API.md); create one with
`manage.py create_api_token <username>`. Tokens DRF's authtoken stored in clear were
converted to hashed ones by migration bms 0001 and keep working until they expire.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

# Longest token we ever issue: knox's 64 hex characters (old DRF keys were 40).
MAX_TOKEN_CHARS = 128


class TokenAuth(TokenAuthentication):
    def authenticate_credentials(self, key: bytes | str):
        if isinstance(key, bytes):
            try:
                key = key.decode("utf-8")
            except UnicodeDecodeError:
                raise AuthenticationFailed("Invalid token.") from None
        if not key.isprintable() or len(key) > MAX_TOKEN_CHARS:
            # A NUL byte cannot even be sent to PostgreSQL (a 500 found by the endpoint fuzz
            # on PostgreSQL); no token has control characters, so it is simply a wrong key.
            raise AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key.encode("utf-8"))


class TokenAuthScheme(OpenApiAuthenticationExtension):
    """The OpenAPI schema's description of TokenAuth (same name as DRF's token scheme had)."""

    target_class = "core.authentication.TokenAuth"
    name = "tokenAuth"
    match_subclasses = True

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix="Token"
        )
