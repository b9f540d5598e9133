"""The gateway loop: serial lines in, API posts out.

Each line is parsed (JeeLib `OK ...` or LLAP `a...` messages), mapped to a node and named
values by the config, and queued per node; `flush()` posts each node's rows to
`/api/v1/readings` with that node's key. A failed post (network, 5xx, 429) keeps the rows for
the next flush (bounded); a 4xx other than that means the rows themselves are wrong, so they
are logged and dropped rather than retried forever. Bad lines are counted, never fatal.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass

from sensors.devices.gateways import jeelib, llap
from sensors.devices.gateways.config import GatewayConfig

log = logging.getLogger(__name__)

MAX_PENDING_ROWS = 10_000  # per node, while the server is unreachable
RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


@dataclass
class GatewayStats:
    lines: int = 0
    readings: int = 0
    unparseable: int = 0
    unknown_radio_nodes: int = 0
    ignored: int = 0  # banners, status messages
    posted_rows: int = 0
    failed_posts: int = 0
    dropped_rows: int = 0


class HttpPoster:
    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        self.url = base_url.rstrip("/") + "/api/v1/readings"
        self.timeout_s = timeout_s

    def post(self, key: str, rows: list[tuple[int, dict[str, float]]]) -> tuple[int, str]:
        """(HTTP status, body); status 0 when the server could not be reached."""
        body = json.dumps([{"time": t, "values": values} for t, values in rows]).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            return 0, str(exc)


class Gateway:
    def __init__(self, config: GatewayConfig, poster: HttpPoster | None = None) -> None:
        self.config = config
        self.poster = poster or HttpPoster(config.url)
        self.stats = GatewayStats()
        self._pending: dict[str, list[tuple[int, dict[str, float]]]] = defaultdict(list)
        self._keys: dict[str, str] = {}
        self._llap_rest = ""

    def feed_line(self, line: str, now: float | None = None) -> None:
        t = int(time.time() if now is None else now)
        self.stats.lines += 1
        try:
            if line.lstrip().startswith("OK"):
                self._jeelib(line, t)
            elif "a" in line and not line.lstrip().startswith(("[", ">")):
                self._llap(line, t)
            else:
                self.stats.ignored += 1
        except (jeelib.JeeLibParseError, llap.LlapParseError) as exc:
            self.stats.unparseable += 1
            log.warning("unparseable line %r: %s", line.strip()[:80], exc)

    def _queue(self, node: str, key: str, t: int, values: dict[str, float]) -> None:
        self._keys[node] = key
        rows = self._pending[node]
        if rows and rows[-1][0] == t:
            rows[-1][1].update(values)
        else:
            rows.append((t, dict(values)))
        self.stats.readings += 1
        if len(rows) > MAX_PENDING_ROWS:
            del rows[: len(rows) - MAX_PENDING_ROWS]
            self.stats.dropped_rows += 1

    def _jeelib(self, line: str, t: int) -> None:
        packet = jeelib.parse_line(line)
        if packet is None:
            self.stats.ignored += 1
            return
        radio = self.config.jeelib.get(packet.node_id)
        if radio is None:
            self.stats.unknown_radio_nodes += 1
            log.info("JeeLib node %d is not in the gateway config", packet.node_id)
            return
        values = jeelib.name_values(
            jeelib.decode_values(packet.data, radio.datacodes),
            list(radio.names),
            list(radio.scales),
        )
        self._queue(radio.node, radio.key, t, values)

    def _llap(self, text: str, t: int) -> None:
        messages, self._llap_rest, skipped = llap.split_messages(self._llap_rest + text)
        if text.endswith("\n"):
            # A complete line: an LLAP message never continues onto the next one.
            skipped += len(self._llap_rest)
            self._llap_rest = ""
        if skipped and not messages:
            raise llap.LlapParseError(f"no LLAP message in {text.strip()[:40]!r}")
        for raw in messages:
            try:
                message = llap.parse_message(raw)
            except llap.LlapParseError as exc:
                self.stats.unparseable += 1
                log.warning("unparseable LLAP message: %s", exc)
                continue
            radio = self.config.llap.get(message.device_id)
            if radio is None:
                self.stats.unknown_radio_nodes += 1
                continue
            if message.value is None:
                self.stats.ignored += 1  # STARTED, AWAKE, SLEEPING ...
                continue
            names = radio.names if isinstance(radio.names, dict) else {}
            scales = radio.scales if isinstance(radio.scales, dict) else {}
            key = names.get(message.command, message.command)
            value = message.value * scales.get(message.command, 1)
            self._queue(radio.node, radio.key, t, {key: value})

    def flush(self) -> int:
        """Post every node's pending rows; returns how many rows were accepted."""
        accepted = 0
        for node in list(self._pending):
            rows = self._pending[node]
            if not rows:
                continue
            status, body = self.poster.post(self._keys[node], rows)
            if 200 <= status < 300:
                accepted += len(rows)
                self.stats.posted_rows += len(rows)
                self._pending[node] = []
                continue
            self.stats.failed_posts += 1
            if status in RETRY_STATUSES or status == 0:
                log.warning("post for %s failed (%s %s); will retry", node, status, body[:200])
            else:
                log.error("post for %s refused (%s %s); rows dropped", node, status, body[:200])
                self.stats.dropped_rows += len(rows)
                self._pending[node] = []
        return accepted

    @property
    def pending_rows(self) -> int:
        return sum(len(rows) for rows in self._pending.values())
