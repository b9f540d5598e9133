"""MQTT ingest as emoncms's emoncms_mqtt service reads it. Under the base topic (`emon`, or
several levels such as `site1/emon`):

    <base>/<node>/<key>            a number: input <key> of <node>
    <base>/<node>/<a>/<b>          deeper levels join with "_": input `a_b` (emoncms)
    <base>/<node>  {"power1": 10, "time": 1720080000}
                                   a JSON object of values; `time` (any case, unix seconds or
                                   ISO 8601) is the reading's time, else the time it arrived
    <base>/<node>  {"p": {"name": "ct1", "value": 10}}   input `p_ct1` (emoncms unboxing)
    <base>/<node>  10,11,12 or [10,11,12]                inputs 0, 1, 2 (emoncms numbers them
                                   from 0 here)

Names may hold spaces and letters of any script, as emoncms allows. In a JSON payload a
value that is not a number is skipped and the others are kept (as on /input/bulk); a
message with no usable value is rejected.

Messages are gathered per node for a short window and handed to the same ingest stream as an
HTTP post, one entry per node per window. The MQTT client runs server-side (a trusted
process on the broker's network), so topics are mapped to nodes by name (or radio node id)
without a write key; unknown and disabled nodes are counted and logged, never created or
ingested.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import paho.mqtt.client as mqtt

from sensors.devices import mqtt_publish
from sensors.devices.mqtt_auth import LOGIN_REFUSED, MqttAuth, apply_auth
from sensors.ingest.emoncms_input import lenient_value, loads_lenient
from sensors.ingest.node_auth import lookup_ref
from sensors.ingest.parse import (
    MIN_TIME,
    IngestError,
    Limits,
    check_key,
    check_node_ref,
    check_value,
    parse_time_value,
)

log = logging.getLogger(__name__)

MAX_TOPIC_LEVELS = 16  # below the base: a bound on the name a topic can build
MAX_PAYLOAD_VALUES = 1000  # values in one message
MAX_PAYLOAD_BYTES = 65_536  # Mosquitto passes up to 256 MB by default: refuse before parsing
MAX_FUTURE_S = Limits().max_future_s


def base_of(subscription: str) -> str:
    """`emon/#` -> `emon`; `site1/emon/#` -> `site1/emon`."""
    return subscription.removesuffix("#").rstrip("/")


def _under_base(topic: str, base: str) -> list[str] | None:
    """The topic's levels below `base` (`+` in the base matches any one level), or None."""
    parts, base_parts = topic.split("/"), base.split("/") if base else []
    if len(parts) <= len(base_parts):
        return None
    for got, want in zip(parts, base_parts, strict=False):
        if want != "+" and got != want:
            return None
    return parts[len(base_parts) :]


def _payload_time(doc: dict, now: float) -> tuple[int, dict]:
    """(reading time, values without `time`): emoncms looks for `time` in any case."""
    key = next((k for k in doc if k.lower() == "time"), None)
    if key is None:
        return int(now), doc
    raw = doc[key]
    values = {k: v for k, v in doc.items() if k != key}
    try:
        t = int(parse_time_value(raw, "payload.time"))
    except IngestError:
        # emoncms: a time it cannot read means "now", and the reading is kept.
        log.warning("MQTT payload time %r not readable; the arrival time is used", raw)
        return int(now), values
    if t < MIN_TIME or t > now + MAX_FUTURE_S:
        raise IngestError(
            f"payload.time {t} is before 2000 or more than {MAX_FUTURE_S} s ahead; "
            "check the device clock",
            field="payload.time",
        )
    return t, values


def _json_values(doc: dict | list, prefix: str) -> dict[str, float]:
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    values: dict[str, float] = {}
    for raw_key, raw in items:
        key = str(raw_key)
        if isinstance(raw, dict) and "value" in raw:  # {"name": "ct1", "value": 10}
            if raw.get("name"):
                key = f"{key}_{raw['name']}"
            raw = raw["value"]
        where = f"payload.{key[:40]}"
        number, why = lenient_value(raw, php_casts=False)
        if number is None:
            log.warning("MQTT %s skipped: %s", where, why)
            continue
        values[check_key(prefix + key, where)] = number
    return values


def parse_message(
    topic: str, payload: bytes, base: str = "emon", now: float | None = None
) -> tuple[str | int, int, dict[str, float]]:
    """(node ref, time, {key: value}) from one message. Raises IngestError when nothing in it
    is ingestible."""
    now = time.time() if now is None else now
    levels = _under_base(topic, base)
    if levels is None:
        raise IngestError(f"topic {topic!r} is not {base}/<node>[/<key>]", field="topic")
    if len(levels) > MAX_TOPIC_LEVELS:
        raise IngestError(f"topic {topic[:80]!r} is too deep", field="topic")
    node = check_node_ref(levels[0].replace(":", ""), "topic")
    if node is None:
        raise IngestError(f"topic {topic!r} has no node", field="topic")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise IngestError(f"payload over {MAX_PAYLOAD_BYTES} bytes", field="payload")
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise IngestError("payload is not UTF-8", field="payload") from None
    name = "_".join(levels[1:]).replace(":", "")
    doc = _json_doc(text)
    if isinstance(doc, dict | list):
        t, body = _payload_time(doc, now) if isinstance(doc, dict) else (int(now), doc)
        if len(body) > MAX_PAYLOAD_VALUES:
            raise IngestError(f"payload: more than {MAX_PAYLOAD_VALUES} values", field="payload")
        values = _json_values(body, f"{name}_" if name else "")
        if not values:
            raise IngestError("payload: no numeric value in it", field="payload")
        return node, t, values
    if name:
        return (
            node,
            int(now),
            {check_key(name, "topic"): check_value(text, "payload", allow_text=True)},
        )
    parts = text.split(",")
    if len(parts) > MAX_PAYLOAD_VALUES:
        raise IngestError(f"payload: more than {MAX_PAYLOAD_VALUES} values", field="payload")
    return (
        node,
        int(now),
        {
            str(i): check_value(part, f"payload[{i}]", allow_text=True)
            for i, part in enumerate(parts)
        },
    )


def _json_doc(text: str) -> object:
    """The payload as JSON when it is an object or a list, else None (a number or CSV)."""
    if not text.startswith(("{", "[")):
        return None
    try:
        return loads_lenient(text)
    except RecursionError as exc:
        raise IngestError("payload: JSON nested too deeply", field="payload") from exc
    except ValueError as exc:
        raise IngestError(f"payload: malformed JSON ({exc})", field="payload") from exc


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
        self.base = base_of(topic)
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
        self.client.on_subscribe = self._on_subscribe
        self.client.on_disconnect = self._on_disconnect

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            log.error("MQTT connect to %s:%s refused: %s", self.host, self.port, reason_code)
            if reason_code.value in LOGIN_REFUSED:
                self.refused = str(reason_code)
                self._stop.set()
            return
        # (Re)subscribe on every connect: a broker restart forgets subscriptions. Connected
        # once the broker has acknowledged it (_on_subscribe): until then a message published
        # to the topic is not delivered to us.
        client.subscribe(self.topic, qos=0)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if any(code.is_failure for code in reason_codes):
            log.error("MQTT subscription to %s refused: %s", self.topic, reason_codes)
            return
        self.connected.set()
        log.info("MQTT subscribed to %s on %s:%s", self.topic, self.host, self.port)

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.connected.clear()
        if not self._stop.is_set():
            log.warning("MQTT disconnected (%s); paho reconnects", reason_code)

    def _on_message(self, client, userdata, message) -> None:
        self.stats.messages += 1
        try:
            node, t, values = parse_message(message.topic, message.payload, self.base)
        except IngestError as exc:
            self.stats.rejected += 1
            log.warning("MQTT %s rejected: %s", message.topic, exc.message)
            return
        self.batcher.add(node, t, values, time.monotonic())

    def flush(self, *, all_: bool = False, now: float | None = None) -> int:
        """Hand on every batch whose window has passed (all of them with `all_`). `now`: the
        time.monotonic() to judge the windows by (tests: past a window without waiting it)."""
        from sensors.ingest import stream as ingest_stream

        sent = 0
        for ref, rows in self.batcher.due(time.monotonic() if now is None else now, all_=all_):
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
                if (
                    self.connected.is_set()
                ):  # publish_to_mqtt steps (sensors/devices/mqtt_publish.py)
                    mqtt_publish.publish_pending(self.client)
        finally:
            self.stop()

    def request_stop(self, *_args) -> None:
        self._stop.set()
