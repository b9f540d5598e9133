"""Freshness load for bench/ingest.py: N nodes posting every `period_s`, each post on its own
connection, and the time from each post's `ok` to its value being readable through
`/feed/data.json`.

A node is what an emonTx on WiFi is: it opens a connection, POSTs `/input/post` with
`fulljson` (its values and the time), reads the answer (`{"success": true}` for fulljson, as
emoncms), closes. Nodes are spread evenly over the
period. For a sampled post (every one at 300 nodes; fewer at 10,000) one checker polls
`/feed/data.json` (`ids=`, 50 feeds a read, keep-alive connections) for the feed of the post's
first value until the point is there: the figure is from the answer to the post to the end of
the read that saw it, so it includes up to one round of reads (printed: the resolution).

A bare asyncio HTTP/1.1 client, so one client process can keep up with 1,000 posts a second
on a machine whose two cores the site also needs.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

CHECK_EVERY_S = 0.005  # the checker's pause between rounds of reads
CHECK_GIVE_UP_S = 30.0  # a value not readable by then is counted as never seen


@dataclass
class BenchNode:
    name: str
    key: str
    feed_id: int  # the feed of its first value ("p1"), the one checked


@dataclass
class FreshResult:
    posts: int = 0
    refused: int = 0
    warm_refused: int = 0  # posts of the warm-up not answered 200 (not in `refused`)
    post_ms: list[float] = field(default_factory=list)
    # (ok_at as time.perf_counter(), ms to readable) of each seen post
    seen: list[tuple[float, float]] = field(default_factory=list)
    never_seen: int = 0
    reads: int = 0
    round_ms: float = 0.0  # a checker round's mean time: the resolution of the figures

    def summary(self) -> dict:
        fresh_ms = [ms for _ok_at, ms in self.seen]

        def pct(values: list[float], q: float) -> float:
            ordered = sorted(values)
            return (
                ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")
            )

        return {
            "posts": self.posts,
            "refused": self.refused,
            "warm_refused": self.warm_refused,
            "checked": len(self.seen) + self.never_seen,
            "never_seen": self.never_seen,
            "reads": self.reads,
            "round_ms": self.round_ms,
            "post_p50_ms": statistics.median(self.post_ms) if self.post_ms else float("nan"),
            "p50_ms": pct(fresh_ms, 0.50),
            "p95_ms": pct(fresh_ms, 0.95),
            "p99_ms": pct(fresh_ms, 0.99),
            "max_ms": max(fresh_ms) if fresh_ms else float("nan"),
        }


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, body


async def _post(port: int, node: BenchNode, t: int, value: float) -> tuple[int, bytes]:
    body = urlencode(
        {
            "node": node.name,
            "fulljson": json.dumps({f"p{k}": value + k - 1 for k in range(1, 6)} | {"time": t}),
            "apikey": node.key,
        }
    ).encode()
    request = (
        b"POST /input/post HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await _exchange(reader, writer, request)
    finally:
        writer.close()


class Checker:
    """Polls /feed/data.json for every post still to be seen, up to MAX_IDS feeds a read
    (`ids=`), so the checks cost about the same number of reads a second at 30 and at 1,000
    posts a second, and do not become the load they measure."""

    MAX_IDS = 50  # feeds/web/query.py's bound on ids=

    def __init__(self, port: int, out: FreshResult) -> None:
        self.port, self.out = port, out
        # (feed, value) -> ok_at, slot: a node's next post may come before its last is seen.
        self.waiting: dict[tuple[int, float], tuple[float, int]] = {}
        self.wake = asyncio.Event()
        self.rounds = 0
        self.round_s = 0.0
        self.done = False

    def expect(self, feed_id: int, value: float, ok_at: float, t: int) -> None:
        self.waiting[(feed_id, value)] = (ok_at, t - t % 10)
        self.wake.set()

    async def run(self) -> None:
        conns = []
        try:
            while not (self.done and not self.waiting):
                if not self.waiting:
                    self.wake.clear()
                    try:
                        await asyncio.wait_for(self.wake.wait(), 0.5)
                    except TimeoutError:
                        pass
                    continue
                started = time.perf_counter()
                feeds = sorted({feed for feed, _ in self.waiting})
                batches = [feeds[i : i + self.MAX_IDS] for i in range(0, len(feeds), self.MAX_IDS)]
                while len(conns) < len(batches):
                    conns.append(await asyncio.open_connection("127.0.0.1", self.port))
                await asyncio.gather(*(self._read(conns, i, b) for i, b in enumerate(batches)))
                self.rounds += 1
                self.round_s += time.perf_counter() - started
                await asyncio.sleep(CHECK_EVERY_S)
        finally:
            for _, writer in conns:
                writer.close()

    async def _exchange(self, conns: list, index: int, request: bytes) -> tuple[int, bytes]:
        """On the checker's kept connection `index`; one the server closed while it sat idle
        (gunicorn's keep-alive is 2 s, and a read of fewer batches leaves some idle) is opened
        again, once."""
        try:
            return await _exchange(*conns[index], request)
        except (asyncio.IncompleteReadError, ConnectionError):
            conns[index][1].close()
            conns[index] = await asyncio.open_connection("127.0.0.1", self.port)
            return await _exchange(*conns[index], request)

    async def _read(self, conns: list, index: int, feeds: list[int]) -> None:
        asked = set(feeds)
        first = min(slot for (feed, _), (_, slot) in self.waiting.items() if feed in asked)
        query = urlencode(
            {
                "ids": ",".join(str(f) for f in feeds),
                "start": (first - 10) * 1000,
                "end": (int(time.time()) + 20) * 1000,
                "interval": 10,
            }
        )
        request = f"GET /feed/data.json?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        status, body = await self._exchange(conns, index, request)
        seen_at = time.perf_counter()
        self.out.reads += 1
        if status != 200:
            raise RuntimeError(f"data.json answered {status}: {body[:200]!r}")
        values = {int(s["feedid"]): {v for _, v in s["data"]} for s in json.loads(body)}
        for (feed_id, value), (ok_at, _) in list(self.waiting.items()):
            if feed_id not in asked:
                continue
            if value in values.get(feed_id, ()):
                self.out.seen.append((ok_at, (seen_at - ok_at) * 1000))
                del self.waiting[(feed_id, value)]
            elif seen_at - ok_at > CHECK_GIVE_UP_S:
                self.out.never_seen += 1
                del self.waiting[(feed_id, value)]


async def _node_loop(
    port: int,
    node: BenchNode,
    index: int,
    offset_s: float,
    period_s: float,
    phase: Phase,
    check_every: int,
    out: FreshResult,
    checker: Checker,
) -> None:
    await asyncio.sleep(offset_s)
    post = 0
    while time.monotonic() < phase.stop_at:
        started = time.monotonic()
        t = int(time.time())
        # Different per node and post, exact in float32: the checker looks for this value.
        value = float(index * 1000 + post % 1000)
        sent = time.perf_counter()
        try:
            status, reply = await _post(port, node, t, value)
        # Refused, reset, or closed unanswered: each counts as refused.
        except (OSError, asyncio.IncompleteReadError) as exc:
            status, reply = 0, repr(exc).encode()
        ok_at = time.perf_counter()
        if started < phase.measure_from:  # the warm-up: posted, neither counted nor checked
            out.warm_refused += status != 200
        elif status == 200 and reply in (b"ok", b'{"success": true}'):  # fulljson: the latter
            out.posts += 1
            out.post_ms.append((ok_at - sent) * 1000)
            # A node posts every 10 s, so its feed has one post waiting at a time.
            if check_every and (index + post) % check_every == 0:
                checker.expect(node.feed_id, value, ok_at, t)
        else:
            out.posts += 1
            out.refused += 1
            print(f"  post of {node.name} refused: {status} {reply[:200]!r}")
        post += 1
        await asyncio.sleep(max(0.0, started + period_s - time.monotonic()))


@dataclass
class Phase:
    """When the measured posts start and stop (time.monotonic()); unknown until the warm-up
    has ended."""

    measure_from: float = float("inf")
    stop_at: float = float("inf")


async def _warm_up(
    phase: Phase,
    warm_s: float,
    seconds: float,
    warm_until: Callable[[], bool] | None,
    on_measure: Callable[[], None] | None,
) -> None:
    """At least `warm_s`, and until warm_until() (asked in a thread: it may take a while)."""
    await asyncio.sleep(warm_s)
    while warm_until is not None and not await asyncio.to_thread(warm_until):
        await asyncio.sleep(2)
    phase.measure_from = time.monotonic()
    phase.stop_at = phase.measure_from + seconds
    if on_measure is not None:
        on_measure()


async def _run(
    port: int,
    nodes: list[BenchNode],
    seconds: float,
    period_s: float,
    check_every: int,
    warm_s: float,
    warm_until: Callable[[], bool] | None,
    on_measure: Callable[[], None] | None,
) -> FreshResult:
    out = FreshResult()
    checker = Checker(port, out)
    checking = asyncio.create_task(checker.run())
    phase = Phase()
    warming = asyncio.create_task(_warm_up(phase, warm_s, seconds, warm_until, on_measure))
    loops = [
        _node_loop(
            port, node, i, period_s * i / len(nodes), period_s, phase, check_every, out, checker
        )
        for i, node in enumerate(nodes)
    ]
    await asyncio.gather(*loops)
    await warming
    checker.done = True
    await checking
    out.round_ms = checker.round_s / max(1, checker.rounds) * 1000
    return out


def run(
    port: int,
    nodes: list[BenchNode],
    seconds: float,
    period_s: float = 10.0,
    check_every: int = 1,
    warm_s: float = 0.0,
    warm_until: Callable[[], bool] | None = None,
    on_measure: Callable[[], None] | None = None,
) -> dict:
    """Post for at least `warm_s` and until warm_until() (nothing counted or checked), then on
    without a pause for `seconds` (on_measure() called as they start), and return the summary
    of those (ms): post p50, ok -> readable p50/p95/p99/max, and `seen`, (ok_at, ms) of each
    seen post, and `warm_s`, how long the warm-up took. check_every=0: nothing checked."""
    started = time.monotonic()
    phase_start: list[float] = []

    def measuring() -> None:
        phase_start.append(time.monotonic())
        print(f"  measured from {time.strftime('%H:%M:%S')} (wall clock)", flush=True)
        if on_measure is not None:
            on_measure()

    out = asyncio.run(
        _run(port, nodes, seconds, period_s, check_every, warm_s, warm_until, measuring)
    )
    return out.summary() | {"seen": out.seen, "warm_s": phase_start[0] - started}
