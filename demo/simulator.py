"""The running demo: steps the plant and talks to the BMS through its real interfaces.

- emonTx/emonTH nodes post to `/input/bulk` over HTTP, emoncms style, each with its own key;
- the JeeLib radio nodes are serial lines (`OK <id> <bytes> (<rssi>)`) piped into the stdin of a
  `manage.py bms_gateway` subprocess, which parses and posts them like a real gateway would;
- the grid meter is a pymodbus server whose registers the Celery poll task reads;
- the relay board is a pymodbus server whose coils the control loop writes; the plant reads
  them every tick, so heating happens only when the BMS actually switched it on; its holding
  register 0 is the mixing valve the plant's weather compensation steers.

No Django here either: the management command resolves keys and settings and hands them in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from demo import layout
from demo.bacnet_controller import BoilerController
from demo.devices import EnergyMeter, RelayBoard
from demo.faults import FaultPlan
from demo.plant import Coils, DemoPlant, jeelib_line
from demo.ports import udp_free

log = logging.getLogger("demo")

HTTP_TIMEOUT_S = 5.0
JEELIB_LOG_MAX_BYTES = 5_000_000  # ~0.4 MB a day: about two weeks per file


def _append_rotating(path: Path, lines: list[str]) -> None:
    """Append lines; past the size limit the file moves to `<name>.1` (replacing the last)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > JEELIB_LOG_MAX_BYTES:
        path.replace(path.with_name(path.name + ".1"))
    with path.open("a") as out:
        out.writelines(line + "\n" for line in lines)


@dataclass
class SimulatorConfig:
    base_url: str
    keys: dict[str, str]  # node name -> write key
    speed: float = 1.0
    relay_host: str = "127.0.0.1"
    relay_port: int = 15020
    meter_host: str = "127.0.0.1"
    meter_port: int = 15021
    duration_s: float | None = None
    tick_s: float = 1.0
    post_interval_s: float = layout.INTERVAL_S
    summary_interval_s: float = 60.0
    gateway_argv: list[str] | None = None  # the bms_gateway command, reading lines on stdin
    jeelib_log: Path | None = None  # every JeeLib line is also appended here
    seed: int | None = None
    # Called (in a thread) once each new wall-clock hour: the energy demo's meter history
    # carries on while the simulator runs (demo.energy.hourly_extender; file writes only).
    hourly: Callable[[float], object] | None = None
    # Last recorded temperatures to resume from (DemoPlant.resume keys); empty on a new site.
    resume: dict[str, float] = field(default_factory=dict)
    # The legacy BACnet boiler controller (demo/bacnet_controller.py); None: not run.
    bacnet_host: str = "127.0.0.1"
    bacnet_port: int | None = None
    # Faults injected from known times (demo/faults.py, simulate_site --fault).
    faults: FaultPlan = field(default_factory=FaultPlan)


@dataclass
class PostStats:
    ok: int = 0
    failed: int = 0
    last_error: dict[str, str] = field(default_factory=dict)


def post_bulk(base_url: str, node: str, key: str, values: dict[str, float], t: int) -> None:
    """POST one emoncms bulk row for a node; raise on anything but the reply `ok`.

    The key goes in the form body (`apikey`), not the URL, so it stays out of access logs.
    """
    data = json.dumps([[t, node, values]], separators=(",", ":"))
    body = urllib.parse.urlencode({"data": data, "apikey": key, "sentat": t}).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + "/input/bulk",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            reply = response.read(200).decode(errors="replace").strip()
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode(errors="replace").strip()
        raise RuntimeError(f"HTTP {exc.code}: {detail}") from exc
    if reply != "ok":
        raise RuntimeError(f"unexpected reply {reply!r}")


class Simulator:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        # The pymodbus servers need a running event loop: they are made in run().
        self.relay: RelayBoard | None = None
        self.meter: EnergyMeter | None = None
        self.bacnet: BoilerController | None = None
        self.plant = DemoPlant(datetime.now(UTC), seed=config.seed)
        self.plant.faults = config.faults
        resumed = self.plant.resume(config.resume)
        if resumed:
            log.info("Resumed from the last recorded values: %s", ", ".join(sorted(resumed)))
        self.gateway: asyncio.subprocess.Process | None = None
        self.stats = PostStats()
        self.jeelib_lines = 0
        self._gateway_broken = False

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        self.relay = RelayBoard(cfg.relay_host, cfg.relay_port)
        self.meter = EnergyMeter(cfg.meter_host, cfg.meter_port)
        try:
            await self.relay.start()
            await self.meter.start()
            await self._start_bacnet()
            await self._start_gateway()
            await self._loop(stop, self.relay, self.meter)
        finally:
            await self._shutdown()

    async def _start_bacnet(self) -> None:
        """The legacy controller, unless its port is taken: the site runs on without it.
        Probed first: bacpypes3 binds with SO_REUSEPORT and retries a failed bind for ever in
        the background, so it would neither fail nor, beside another BACnet device, be alone."""
        cfg = self.config
        if cfg.bacnet_port is None:
            return
        if not udp_free(cfg.bacnet_port, cfg.bacnet_host):
            log.warning(
                "Demo BACnet controller off: UDP %s:%d is taken", cfg.bacnet_host, cfg.bacnet_port
            )
            return
        controller = BoilerController(cfg.bacnet_host, cfg.bacnet_port)
        await controller.start()
        self.bacnet = controller

    async def _start_gateway(self) -> None:
        argv = self.config.gateway_argv
        if not argv:
            log.warning(
                "No JeeLib gateway command: JeeLib lines are only written to %s",
                self.config.jeelib_log,
            )
            return
        # Its own session: Ctrl-C in a terminal reaches only the simulator, which then ends the
        # gateway's input so it flushes what it holds and exits by itself.
        self.gateway = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, start_new_session=True
        )
        log.info("Started the JeeLib gateway (pid %d): %s", self.gateway.pid, " ".join(argv))

    async def _loop(self, stop: asyncio.Event, relay: RelayBoard, meter: EnergyMeter) -> None:
        cfg = self.config
        started = last_step = time.monotonic()
        next_post = started
        next_summary = started + min(cfg.summary_interval_s, 10.0)
        last_hour = int(time.time()) // 3600  # setup wrote up to this hour
        log.info(
            "Simulating at %g× speed (physics); posting every %g s at wall-clock time",
            cfg.speed,
            cfg.post_interval_s,
        )
        while not stop.is_set():
            now_mono = time.monotonic()
            if cfg.duration_s is not None and now_mono - started >= cfg.duration_s:
                log.info("Duration of %g s reached; stopping", cfg.duration_s)
                break
            coils = Coils.from_bits(await relay.coils(), await relay.holding())
            if coils != self.plant.coils:
                log.info("Relay board now: %s", coils.describe())
            self.plant.step(datetime.now(UTC), now_mono - last_step, cfg.speed, coils)
            last_step = now_mono
            await meter.publish(self.plant.meter_values())
            if self.bacnet is not None:
                self.bacnet.publish(self.plant.circuit.flow_c)
            if now_mono >= next_post:
                next_post += cfg.post_interval_s
                if next_post < now_mono:  # fell behind (a slow server): do not burst
                    next_post = now_mono + cfg.post_interval_s
                await self._post_all()
            hour = int(time.time()) // 3600
            if cfg.hourly is not None and hour != last_hour:
                last_hour = hour
                try:
                    await asyncio.to_thread(cfg.hourly, time.time())
                except OSError as exc:  # a full disk must not stop the simulated site
                    log.warning("Energy history not extended: %s", exc)
            if now_mono >= next_summary:
                next_summary = now_mono + cfg.summary_interval_s
                log.info("%s", self.plant.summary())
                log.info(
                    "Posts: %d ok, %d failed; JeeLib lines sent: %d",
                    self.stats.ok,
                    self.stats.failed,
                    self.jeelib_lines,
                )
            try:
                await asyncio.wait_for(stop.wait(), timeout=cfg.tick_s)
            except TimeoutError:
                pass  # the normal case: a tick went by without a stop request

    async def _post_all(self) -> None:
        t = int(time.time())
        nodes = self.plant.http_values()
        # Posts run in threads (urllib blocks); their outcomes are counted here, in the loop.
        errors = await asyncio.gather(
            *(asyncio.to_thread(self._post_node, node, values, t) for node, values in nodes.items())
        )
        for node, error in zip(nodes, errors, strict=True):
            if error is None:
                self.stats.ok += 1
                if self.stats.last_error.pop(node, None) is not None:
                    log.info("Posting for node %s works again", node)
            else:
                self._failed(node, error)
        await self._send_jeelib()

    def _post_node(self, node: str, values: dict[str, float], t: int) -> str | None:
        """Post one node's values; return the error, or None when the server said `ok`."""
        key = self.config.keys.get(node)
        if key is None:
            return "no write key on file for this node"
        try:
            post_bulk(self.config.base_url, node, key, values, t)
        except (OSError, RuntimeError) as exc:
            return str(exc)
        return None

    def _failed(self, node: str, error: str) -> None:
        self.stats.failed += 1
        # Log each distinct problem once per node, not every 10 s.
        if self.stats.last_error.get(node) != error:
            self.stats.last_error[node] = error
            log.warning(
                "Post for node %s to %s/input/bulk failed: %s", node, self.config.base_url, error
            )

    async def _send_jeelib(self) -> None:
        codes = {spec.node_id: spec.datacodes for spec in layout.JEELIB_NODES}
        lines = [
            jeelib_line(node_id, values, datacodes=codes.get(node_id, "h"))
            for node_id, values in self.plant.jeelib_frames().items()
        ]
        if self.config.jeelib_log is not None:
            _append_rotating(self.config.jeelib_log, lines)
        if self.gateway is None or self.gateway.stdin is None or self._gateway_broken:
            return
        if self.gateway.returncode is not None:
            log.error("The JeeLib gateway exited with code %s", self.gateway.returncode)
            self._gateway_broken = True
            return
        try:
            self.gateway.stdin.write("".join(line + "\n" for line in lines).encode())
            await asyncio.wait_for(self.gateway.stdin.drain(), timeout=HTTP_TIMEOUT_S)
        except (BrokenPipeError, ConnectionResetError, TimeoutError) as exc:
            log.error("Could not write to the JeeLib gateway: %s", exc)
            self._gateway_broken = True
            return
        self.jeelib_lines += len(lines)

    async def _shutdown(self) -> None:
        if self.gateway is not None:
            if self.gateway.stdin is not None:
                self.gateway.stdin.close()  # end of input: the gateway finishes and exits
            try:
                await asyncio.wait_for(self.gateway.wait(), timeout=5)
            except TimeoutError:
                self.gateway.terminate()
                try:
                    await asyncio.wait_for(self.gateway.wait(), timeout=5)
                except TimeoutError:
                    self.gateway.kill()
                    await self.gateway.wait()
            log.info("JeeLib gateway stopped (exit code %s)", self.gateway.returncode)
        for device in (self.meter, self.relay, self.bacnet):
            if device is not None:
                await device.stop()
        log.info(
            "Simulator stopped. Posts: %d ok, %d failed; JeeLib lines sent: %d",
            self.stats.ok,
            self.stats.failed,
            self.jeelib_lines,
        )
