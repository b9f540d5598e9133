"""Node write keys: 32 hex characters (the emoncms write-key length emonhub insists on).

Only a SHA-256 hash is stored; the first 8 characters are kept as a lookup prefix and
the full hash is compared in constant time. Keys are random 128-bit secrets, so a fast
hash is enough: there is nothing to brute-force that a slow hash would protect.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_LENGTH = 32
PREFIX_LENGTH = 8


def generate_key() -> str:
    return secrets.token_hex(KEY_LENGTH // 2)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_prefix(key: str) -> str:
    return key[:PREFIX_LENGTH]


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)
