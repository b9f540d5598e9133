"""Small helpers that read settings from the environment.

A bad value raises ImproperlyConfigured at start-up, not a surprise later.
`<NAME>_FILE` is honoured for secrets so Docker secrets work unchanged.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path} cannot be read: {exc}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false)")


def _env_number(name: str, default, parse, kind: str, minimum=None, maximum=None):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} must be at most {maximum}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of: {', '.join(choices)}")
    return value


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum, maximum)


def env_float(
    name: str, default: float, minimum: float | None = None, maximum: float | None = None
) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum)


# A DNS name (RFC 1123 labels) or an IPv4 address; checked for form only, never resolved here
# (the name server may not be up when a process starts).
_HOST = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


def env_ipv4_interface(name: str, default: str) -> str:
    """An IPv4 address with an optional prefix ("192.168.50.20/24"), as given."""
    raw = env_str(name, default).strip()
    try:
        ipaddress.IPv4Interface(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an IPv4 address with an optional prefix "
            f"(e.g. 192.168.50.20/24): {exc}"
        ) from exc
    return raw


def env_host_port(name: str, default: str) -> str:
    """Empty, or "host" or "host:port" (a port 1-65535), as given."""
    raw = env_str(name, default).strip()
    if not raw:
        return raw
    host, sep, port = raw.partition(":")
    if (
        not _HOST.fullmatch(host)
        or (_dotted_quad_like(host) and not _ipv4(host))
        or (sep and not (port.isdigit() and 1 <= int(port) <= 65535))
    ):
        raise ImproperlyConfigured(
            f'{name}={raw!r} is not "host" or "host:port" (an address or name, and a '
            "port 1-65535), e.g. 192.168.60.1 or 192.168.60.1:47808"
        )
    return raw


def _dotted_quad_like(host: str) -> bool:
    return all(part.isdigit() for part in host.split("."))


def _ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def read_dotenv(path: Path) -> None:
    """Load KEY=VALUE lines from a .env file without overriding the real environment."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))
