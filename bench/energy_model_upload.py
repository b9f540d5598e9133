"""Site energy model CSV upload. Prints its figures;
see docs/BENCHMARKS.md "Energy".

One site of 50 buildings; a model CSV of N rows (50 buildings x electricity and gas x monthly
periods), POSTed to /api/v1/energy/expected/upload through Django's test client as an engineer
(full middleware, session, DRF multipart): 2,000 rows, 10,000 rows (the limit) into an empty
model, the same 10,000 again (each row replaces its stored twin), and 10,001 rows (refused with
a 400). Target: 10,000 rows well under 2 s.

Scratch data dir and SQLite file (or --database-url, an empty database), Redis db --redis-db
(only read by settings; not flushed).

    .venv/bin/python bench/energy_model_upload.py [--redis-db 8] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)

BUILDINGS = 50
TARGET_S = 2.0


def model_csv(rows: int) -> bytes:
    lines = ["building,fuel,start,end,kwh"]
    n = 0
    month = 0
    while n < rows:
        year, m = divmod(month, 12)
        first = date(2000 + year, m + 1, 1)
        last = date(2000 + year + (m == 11), (m + 1) % 12 + 1, 1).toordinal() - 1
        for b in range(BUILDINGS):
            for fuel in ("electricity", "gas"):
                if n < rows:
                    lines.append(f"Building {b},{fuel},{first},{date.fromordinal(last)},"
                                 f"{1000 + b + month}")  # fmt: skip
                    n += 1
        month += 1
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-db", type=int, default=8)
    parser.add_argument("--database-url", help="default: a scratch SQLite file")
    args = parser.parse_args()
    base = scratch_site.start(
        "bench-energy-model-", f"redis://127.0.0.1:6379/{args.redis_db}",
        database_url=args.database_url,
    )  # fmt: skip
    from django.contrib.auth.models import Group, User
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.db import connection
    from django.test import Client

    from core.roles import ENGINEERS
    from energy.models import ExpectedUse, MeterNode
    from sensors.models import Site

    print(f"database {connection.vendor}; nproc {os.cpu_count()}; load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    try:
        user = User.objects.create_user("bench-engineer", password="x", is_staff=True)
        user.groups.add(Group.objects.get(name=ENGINEERS))
        site = Site.objects.create(name="Bench campus", slug="bench")
        MeterNode.objects.bulk_create(
            [MeterNode(site=site, name=f"Building {b}", kind="building") for b in range(BUILDINGS)]
        )
        client = Client()
        client.force_login(user)
        ok = True
        for label, rows, status in [
            ("2,000 rows, empty model", 2000, 201),
            ("10,000 rows (the limit), after the 2,000", 10_000, 201),
            ("the same 10,000 again (replace)", 10_000, 201),
            ("10,001 rows (refused)", 10_001, 400),
        ]:
            body = model_csv(rows)
            t0 = time.perf_counter()
            r = client.post(
                "/api/v1/energy/expected/upload",
                {"site": site.pk, "file": SimpleUploadedFile("m.csv", body, "text/csv")},
            )
            took = time.perf_counter() - t0
            assert r.status_code == status, (label, r.status_code, r.content[:300])
            mark = "" if took < TARGET_S else "  OVER THE TARGET"
            ok = ok and took < TARGET_S
            print(f"{label:45s} {r.status_code}  {took * 1000:8.0f} ms{mark}")
        print(f"rows stored: {ExpectedUse.objects.count()}")
        print("all under the target" if ok else "SOME CASES OVER THE TARGET")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
