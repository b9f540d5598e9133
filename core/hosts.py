"""What a network address typed into a configuration may be: a host name or an IP address.

A relay board's or output module's host is only used when the control tick connects to it, so
a value such as "http://x y/../" used to be accepted and failed at every tick instead of at the
form (outside test, session 6). Shared by sensors (meters, relays) and control (output modules,
relay boards)."""

from __future__ import annotations

import ipaddress
import re

from django.core.exceptions import ValidationError

# RFC 1123 labels: letters, digits and hyphens, not starting or ending with a hyphen.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def validate_host(value: str) -> None:
    host = (value or "").strip()
    if not host:
        return  # blank is the field's own business (blank=True or required)
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValidationError(
            "Not a host name or IP address (for example 192.168.1.20 or relays.plantroom.local): "
            "no scheme, port, path or spaces.",
            code="invalid_host",
        )
