"""Compare feeds/emoncms/read.py with emoncms's own PHPFina::get_data_combined on the same file.

Needs php-cli and an emoncms checkout (not shipped, not used by the tests):
    EMONCMS_DIR=/path/to/emoncms .venv/bin/python scripts/emoncms-compare/compare.py
Writes a 400-day 60 s feed with gaps to a temporary directory, asks both engines 72 requests
(averaged/sampled, unaligned starts, limitinterval, skipmissing, daily/weekly/monthly/annual in
three zones) and prints how many points differ. Result recorded in docs/RELIABILITY.md.
"""

import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from feeds.emoncms import php_dates
from feeds.emoncms import read as emoncms_read
from feeds.store import phpfina

HERE = Path(__file__).resolve().parent
D = tempfile.mkdtemp()
ST = 1703030400  # 2023-12-20 00:00 UTC
_rng = np.random.default_rng(5)
_n = 400 * 1440
_v = 1500 + np.cumsum(_rng.normal(0, 40, _n))
for _ in range(80):
    _a = int(_rng.integers(0, _n))
    _v[_a : _a + int(_rng.choice([1, 3, 60, 1440]))] = np.nan
Path(D, "1.meta").write_bytes(phpfina.pack_meta(60, ST))
Path(D, "1.dat").write_bytes(_v.astype("<f4").tobytes())
assert os.environ.get("EMONCMS_DIR"), "set EMONCMS_DIR to an emoncms checkout"
rng = random.Random(7)
cases = [
    (ST + 12345, ST + 12345 + 365 * 86400, 31536, 1, "Europe/London", 0, 0),
    (ST + 12345, ST + 12345 + 365 * 86400, 31536, 0, "Europe/London", 0, 0),
    (ST - 5000, ST + 86400, 95, 1, "UTC", 0, 0),
    (ST - 5000, ST + 86400, 95, 1, "UTC", 0, 1),
    (ST + 7, ST + 20000, 7, 0, "UTC", 0, 0),
    (ST + 7, ST + 20000, 7, 0, "UTC", 1, 1),
    (ST + 90 * 86400, ST + 330 * 86400, "daily", 1, "Europe/London", 0, 0),
    (ST + 90 * 86400, ST + 330 * 86400, "daily", 0, "Europe/London", 0, 0),
    (ST + 90 * 86400, ST + 330 * 86400, "daily", 1, "America/New_York", 1, 0),
    (ST + 86400 * 3 + 500, ST + 399 * 86400, "weekly", 1, "Europe/London", 0, 0),
    (ST + 86400 * 3 + 500, ST + 399 * 86400, "monthly", 1, "Australia/Sydney", 0, 0),
    (ST + 86400 * 3 + 500, ST + 399 * 86400, "annual", 1, "Europe/London", 0, 0),
]
for _ in range(60):
    s = ST + rng.randrange(-86400, 400 * 86400)
    iv = rng.choice([60, 61, 300, 3599, 86400, "daily", "weekly", "monthly"])
    e = s + rng.randrange(3600, 60 * 86400)
    if isinstance(iv, int) and (e - s) // iv > 15000:
        iv = (e - s) // 15000 + 1
    cases.append(
        (
            s,
            e,
            iv,
            rng.randint(0, 1),
            rng.choice(["UTC", "Europe/London", "America/New_York"]),
            rng.randint(0, 1),
            rng.randint(0, 1),
        )
    )
points = mismatches = 0
worst = 0.0
for s, e, iv, avg, tz, skip, limit in cases:
    out = subprocess.run(
        [
            "php",
            str(HERE / "run_phpfina.php"),
            D,
            "1",
            str(s),
            str(e),
            str(iv),
            str(avg),
            tz,
            str(skip),
            str(limit),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    theirs = json.loads(out)
    req = emoncms_read.Request(
        s, e, iv, average=bool(avg), skipmissing=bool(skip), limitinterval=bool(limit), timezone=tz
    )
    t, v = emoncms_read.read(D, 1, req, max_points=100000)
    ours = [[a, None if math.isnan(b) else b] for a, b in zip(t.tolist(), v.tolist(), strict=True)]
    if [p[0] for p in ours] != [p[0] for p in theirs]:
        mismatches += 1
        print("TIMES DIFFER", s, e, iv, avg, tz, skip, limit, len(ours), len(theirs))
        continue
    for (a, x), (_, y) in zip(ours, theirs, strict=True):
        points += 1
        if (x is None) != (y is None):
            mismatches += 1
            print("NULL DIFFERS", s, iv, a, x, y)
            break
        if x is not None and x != y:
            worst = max(worst, abs(x - y) / max(abs(y), 1e-300))
print(
    f"{len(cases)} requests, {points} points compared, {mismatches} mismatching requests, "
    f"worst relative difference {worst:.3g}"
)

bad = 0
for _ in range(300):
    end = rng.randrange(1690000000, 1760000000)
    iv = rng.choice(["daily", "weekly", "monthly", "annual"])
    tz = rng.choice(["Europe/London", "America/New_York", "Australia/Sydney", "UTC"])
    php = subprocess.run(
        ["php", str(HERE / "delta_end.php"), str(end), iv, tz],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bad += int(php) != emoncms_read.delta_end(end, iv, tz)
print(f"300 delta end moves (feed_model.php delta_mode_next_interval), {bad} differ")

STRINGS = ["now", "today", "midnight", "yesterday", "tomorrow", "-1 week", "-2 days", "+3 hours",
           "-1 month", "-1 year", "01-12-2021", "2021-12-01", "2021-12-01 10:30", "today -1 week",
           "-1 day midnight", "-90 minutes", "-1 weeks", "-1 sec", "2021-07-01T10:30:00",
           "+1 month", "-6 months", "2024-01-31 +1 month", "-1 fortnight", "now -1 hour",
           "-25 hours"]  # fmt: skip
bad = n = 0
for tz in ("Europe/London", "America/New_York", "Australia/Sydney", "UTC"):
    for _ in range(8):
        now = rng.randrange(1690000000, 1760000000)
        out = subprocess.run(["php", str(HERE / "php_dates.php"), str(now), tz, *STRINGS],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        for line in out.splitlines():
            text, t = line.rsplit("|", 1)
            n += 1
            bad += php_dates.parse(text, tz, now) != int(t)
print(f"{n} date strings (DateTime::modify), {bad} differ")
