"""MQTT ingest: emonhub publishes `emon/<node>/<key>` with a number as the payload (or
`emon/<node>` with a JSON object of values). Messages are gathered per node for a short
window and handed to the same Celery task as an HTTP post, one task per node per window.

The MQTT client runs server-side (a trusted process on the broker's network), so topics are
mapped to nodes by name (or radio node id) without a write key; unknown and disabled nodes
are counted and logged, never created or ingested.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import paho.mqtt.client as mqtt

from sensors.ingest import IngestError, check_key, check_node_ref, check_value, loads_strict
from sensors.mqtt_auth import LOGIN_REFUSED, MqttAuth, apply_auth
from sensors.node_auth import lookup_ref

log = logging.getLogger(__name__)


def parse_message(
    topic: str, payload: bytes, base: str = "emon"
) -> tuple[str | int, dict[str, float]]:
    """(node ref, {key: value}) from one message. Raises IngestError when it is not ingestible."""
    parts = topic.split("/")
    if len(parts) < 2 or parts[0] != base:
        raise IngestError(f"topic {topic!r} is not {base}/<node>[/<key>]", field="topic")
    node = check_node_ref(parts[1], "topic")
    if node is None:
        raise IngestError(f"topic {topic!r} has no node", field="topic")
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise IngestError("payload is not UTF-8", field="payload") from None
    if len(parts) == 3:
        return node, {check_key(parts[2], "topic"): check_value(text, "payload", allow_text=True)}
    if len(parts) == 2:
        doc = loads_strict(text, "payload")
        if not isinstance(doc, dict):
            raise IngestError("payload of emon/<node> must be a JSON object", field="payload")
        doc.pop("time", None)
        return node, {
            check_key(k, "payload"): check_value(v, f"payload.{k}", allow_text=False)
            for k, v in doc.items()
        }
    raise IngestError(f"topic {topic!r} is too deep", field="topic")


@dataclass
class MqttStats:
    messages: int = 0
    rejected: int = 0
    unknown_nodes: int = 0
    disabled_nodes: int = 0
    batches: int = 0


@dataclass
class Batcher:
    """Readings per node; a node's batch is released `window_s` after its first message."""

    window_s: float = 1.0
    _pending: dict = field(default_factory=lambda: defaultdict(dict))
    _opened: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, node: str | int, t: int, values: dict[str, float], now: float) -> None:
        with self._lock:
            self._opened.setdefault(node, now)
            self._pending[node].setdefault(t, {}).update(values)

    def due(self, now: float, *, all_: bool = False) -> list[tuple[str | int, list[list]]]:
        with self._lock:
            ready = [
                n for n, opened in self._opened.items() if all_ or now - opened >= self.window_s
            ]
            out = []
            for node in ready:
                rows = [[t, values] for t, values in sorted(self._pending.pop(node).items())]
                del self._opened[node]
                out.append((node, rows))
            return out


class MqttIngestor:
    """Subscribe, batch, enqueue. `run()` blocks until `stop()`; tests call start/stop."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 1883, topic: str = "emon/#",
        window_s: float = 1.0, keepalive: int = 60, auth: MqttAuth | None = None,
    ) -> None:  # fmt: skip
        self.host, self.port, self.topic, self.keepalive = host, port, topic, keepalive
        self.base = topic.split("/")[0]
        self.batcher = Batcher(window_s)
        self.stats = MqttStats()
        self.connected = threading.Event()
        # Why the broker refused the login, when no retry can help (bad password, not
        # authorized): run() then stops instead of knocking forever.
        self.refused: str | None = None
        self._stop = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        apply_auth(self.client, auth or MqttAuth())
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_disconnect = self._on_disconnect

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            log.error("MQTT connect to %s:%s refused: %s", self.host, self.port, reason_code)
            if reason_code.value in LOGIN_REFUSED:
                self.refused = str(reason_code)
                self._stop.set()
            return
        # (Re)subscribe on every connect: a broker restart forgets subscriptions.
        client.subscribe(self.topic, qos=0)
        self.connected.set()
        log.info("MQTT subscribed to %s on %s:%s", self.topic, self.host, self.port)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.connected.clear()
        if not self._stop.is_set():
            log.warning("MQTT disconnected (%s); paho reconnects", reason_code)

    def _on_message(self, client, userdata, message) -> None:
        self.stats.messages += 1
        try:
            node, values = parse_message(message.topic, message.payload, self.base)
        except IngestError as exc:
            self.stats.rejected += 1
            log.warning("MQTT %s rejected: %s", message.topic, exc.message)
            return
        self.batcher.add(node, int(time.time()), values, time.monotonic())

    def flush(self, *, all_: bool = False) -> int:
        from sensors import ingest_stream

        sent = 0
        for ref, rows in self.batcher.due(time.monotonic(), all_=all_):
            identity = lookup_ref(ref)
            if identity is None:
                self.stats.unknown_nodes += 1
                log.warning("MQTT readings for unknown node %r dropped (register it first)", ref)
                continue
            if not identity.enabled:
                # A disabled node's key is refused over HTTP; MQTT has no key, so the flag
                # is the only thing that keeps a decommissioned node out.
                self.stats.disabled_nodes += 1
                log.warning("MQTT readings for disabled node %s dropped", identity.name)
                continue
            ingest_stream.append(identity.id, rows)  # the node's stream, as over HTTP
            self.stats.batches += 1
            sent += 1
        return sent

    def start(self) -> None:
        self.client.reconnect_delay_set(min_delay=1, max_delay=30)
        self.client.connect_async(self.host, self.port, keepalive=self.keepalive)
        self.client.loop_start()

    def stop(self) -> None:
        self._stop.set()
        self.flush(all_=True)
        self.client.disconnect()
        self.client.loop_stop()

    def run(self, tick_s: float = 0.2) -> None:
        self.start()
        try:
            while not self._stop.wait(tick_s):
                self.flush()
        finally:
            self.stop()

    def request_stop(self, *_args) -> None:
        self._stop.set()
