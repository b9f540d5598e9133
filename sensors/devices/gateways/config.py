"""The gateway's config file (JSON): where to post, and what each radio node is.

{
  "url": "http://127.0.0.1:8000",
  "jeelib": {"10": {"node": "emontx1", "key": "<32-char write key>",
                    "names": ["power1", "power2", "vrms"], "scales": [1, 1, 0.01],
                    "datacodes": "h"}},
  "llap":   {"XX": {"node": "llap-xx", "key": "<32-char write key>",
                    "names": {"TMPA": "temperature"}, "scales": {"TMPA": 1}}}
}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sensors.devices.gateways.jeelib import DATACODES


class GatewayConfigError(ValueError):
    pass


@dataclass(frozen=True)
class RadioNode:
    node: str
    key: str
    names: list[str] | dict[str, str] = field(default_factory=list)
    scales: list[float] | dict[str, float] = field(default_factory=list)
    datacodes: str = "h"


@dataclass(frozen=True)
class GatewayConfig:
    url: str
    jeelib: dict[int, RadioNode]
    llap: dict[str, RadioNode]


def _radio_node(section: str, ident: str, raw: object, mapping: bool) -> RadioNode:
    where = f"{section}.{ident}"
    if not isinstance(raw, dict):
        raise GatewayConfigError(f"{where}: must be an object")
    node, key = raw.get("node"), raw.get("key")
    if not isinstance(node, str) or not node:
        raise GatewayConfigError(f"{where}.node: the node name is required")
    if not isinstance(key, str) or len(key) != 32:
        raise GatewayConfigError(f"{where}.key: the node's 32-character write key is required")
    names = raw.get("names", {} if mapping else [])
    scales = raw.get("scales", {} if mapping else [])
    kind = dict if mapping else list
    if not isinstance(names, kind) or not isinstance(scales, kind):
        raise GatewayConfigError(f"{where}: names and scales must be {kind.__name__}s")
    numbers = scales.values() if mapping else scales
    if any(isinstance(s, bool) or not isinstance(s, int | float) for s in numbers):
        raise GatewayConfigError(f"{where}.scales: must be numbers")
    datacodes = raw.get("datacodes", "h")
    if not isinstance(datacodes, str) or not datacodes or set(datacodes) - DATACODES.keys():
        raise GatewayConfigError(f"{where}.datacodes: struct codes from {''.join(DATACODES)}")
    return RadioNode(node, key, names, scales, datacodes)


def parse_config(doc: object) -> GatewayConfig:
    if not isinstance(doc, dict):
        raise GatewayConfigError("config must be a JSON object")
    url = doc.get("url", "http://127.0.0.1:8000")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise GatewayConfigError("url: must start with http:// or https://")
    jeelib: dict[int, RadioNode] = {}
    for ident, raw in (doc.get("jeelib") or {}).items():
        if not (str(ident).isascii() and str(ident).isdigit()) or not 0 <= int(ident) <= 31:
            raise GatewayConfigError(f"jeelib.{ident}: radio node ids are 0-31")
        jeelib[int(ident)] = _radio_node("jeelib", ident, raw, mapping=False)
    llap: dict[str, RadioNode] = {}
    for ident, raw in (doc.get("llap") or {}).items():
        if len(ident) != 2:
            raise GatewayConfigError(f"llap.{ident}: LLAP device ids are 2 characters")
        llap[ident] = _radio_node("llap", ident, raw, mapping=True)
    return GatewayConfig(url.rstrip("/"), jeelib, llap)


def load_config(path: str | Path) -> GatewayConfig:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise GatewayConfigError(f"{path}: {exc}") from exc
    return parse_config(doc)
