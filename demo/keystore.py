"""The simulator's own record of the node write keys it generated (plaintext, mode 0600),
and the JeeLib gateway config built from them (it holds keys too).

The database stores only hashes, so without this file every restart would have to rotate every
key. Only the simulator reads it; it lives under BMS_DATA_DIR (var/demo/keys.json by default).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class KeyStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: dict[str, str] = {}
        if path.exists():
            loaded = json.loads(path.read_text() or "{}")
            if not isinstance(loaded, dict):
                raise ValueError(f"{path} must hold a JSON object of node name -> key")
            self.keys = {str(k): str(v) for k, v in loaded.items()}

    def get(self, node_name: str) -> str | None:
        return self.keys.get(node_name)

    def set(self, node_name: str, key: str) -> None:
        self.keys[node_name] = key

    def save(self) -> None:
        write_private_json(self.path, self.keys)


def write_private_json(path: Path, doc: object) -> None:
    """Write JSON atomically with owner-only permissions: the file holds secrets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=1, sort_keys=True)
    os.chmod(tmp, 0o600)  # in case the file already existed with wider permissions
    os.replace(tmp, path)


def gateway_config(base_url: str, keys: dict[str, str]) -> dict:
    """The `manage.py bms_gateway --config` document for the demo's JeeLib nodes: which radio
    id is which node, its key, and the names, scales and struct codes of its values."""
    from demo import layout

    return {
        "url": base_url,
        "jeelib": {
            str(spec.node_id): {
                "node": spec.name,
                "key": keys[spec.name],
                "names": [item.key for item in spec.inputs],
                "scales": [item.radio_scale for item in spec.inputs],
                "datacodes": spec.datacodes,
            }
            for spec in layout.JEELIB_NODES
            if spec.name in keys
        },
    }
