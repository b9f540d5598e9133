"""A clock that survives its host: two real beat processes share RedBeat's lock in
Redis, a real worker runs what they send. Every tick is sent once while both run; when the
active beat is killed (SIGKILL: no lock released), the standby ticks within two tick periods."""

from __future__ import annotations

import time

import pytest

from tests.reliability.beat_probe import PROBE_KEY
from tests.wait import wait_for

pytestmark = pytest.mark.integration

TICK_S = 3.0
HA = {
    "DJANGO_SETTINGS_MODULE": "tests.reliability.beat_ha_settings",
    "BMS_PROBE_EVERY_S": str(TICK_S),
    "BMS_BEAT_MAX_LOOP_S": "1",  # the standby tries the lock every second
    "BMS_BEAT_LOCK_TIMEOUT": "3",  # a dead beat's lock lapses 3 s after its last renewal
}


def runs(client) -> list[float]:
    return [float(x) for x in client.lrange(PROBE_KEY, 0, -1)]


LOCK_KEY = "bms:redbeat::lock"  # CELERY_REDBEAT_KEY_PREFIX + RedBeat's ":lock"


def test_two_beats_tick_once_and_the_standby_takes_over_within_two_ticks(fault_site):
    client = fault_site.redis.client()
    fault_site.start_worker("worker", "ingest", **HA)
    fault_site.start_beat("beat-a", **HA)
    wait_for(lambda: client.get(LOCK_KEY), 60, "beat-a to take the lock")
    token_a = client.get(LOCK_KEY)
    fault_site.start_beat("beat-b", **HA)
    wait_for(lambda: len(runs(client)) >= 2, 60, "the first ticks")

    # Both beats run: still one tick per period, never two.
    time.sleep(5 * TICK_S)  # a real pause: proving no tick is sent twice takes ticks
    assert client.get(LOCK_KEY) == token_a  # beat-b waits as the standby
    both = runs(client)
    spacing = [b - a for a, b in zip(both, both[1:], strict=False)]
    assert min(spacing) > TICK_S / 2, f"a tick was sent twice: {spacing}"

    killed_at = time.time()
    fault_site.kill("beat-a")
    # The lock first: a tick beat-a sent just before it died can run after killed_at on a
    # loaded machine, so a tick alone does not say the standby took over.
    wait_for(
        lambda: client.get(LOCK_KEY) not in (None, token_a), 10 * TICK_S, "beat-b to take the lock"
    )
    took_at = time.time()
    wait_for(lambda: runs(client)[-1] > took_at, 10 * TICK_S, "the standby's first tick")
    takeover_s = runs(client)[-1] - killed_at
    time.sleep(3 * TICK_S)  # a real pause: the new active beat's ticks, each sent once

    after = [t for t in runs(client) if t > took_at]
    spacing_after = [b - a for a, b in zip(after, after[1:], strict=False)]
    all_runs = runs(client)
    gaps = [b - a for a, b in zip(all_runs, all_runs[1:], strict=False)]
    print(
        f"\nbeat HA: tick {TICK_S:g} s, lock 3 s, standby retry 1 s: takeover "
        f"{takeover_s:.1f} s after SIGKILL of the active beat; longest gap between ticks "
        f"{max(gaps):.1f} s; shortest {min(gaps):.1f} s; {len(all_runs)} ticks"
    )
    # How soon (the two-tick target) is a figure, printed above and in docs/RELIABILITY.md,
    # not an assertion: on a loaded machine a real process's timing is the machine's. What
    # must hold whatever the load: the standby took over and ticks.
    assert after, "the standby never ticked after the active beat was killed"
    assert min(spacing_after) > TICK_S / 2  # the new active sends each tick once
