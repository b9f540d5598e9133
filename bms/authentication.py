"""DRF token authentication that refuses a malformed key before it reaches the database."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed


class TokenAuth(TokenAuthentication):
    def authenticate_credentials(self, key):
        if not key.isprintable():
            # A NUL byte cannot even be sent to PostgreSQL (a 500 found by the endpoint fuzz
            # on PostgreSQL); no token has control characters, so it is simply a wrong key.
            raise AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key)
