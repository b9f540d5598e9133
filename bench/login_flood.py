"""Login flood benchmark: wrong passwords against the admin login while
a kiosk display is read, with and without the lockout.

Starts its own gunicorn (3 workers x 4 threads, as scripts/run-site.sh) on a scratch data dir,
SQLite file and the Redis db of REDIS_URL, with Django's production password hasher, then:
  1. baseline: kiosk data.json read back to back for --baseline seconds;
  2. flood:    --attempts wrong passwords for one user from one IP, --clients at a time,
               while the kiosk is read as in 1.
Twice: with the lockout as configured (5 failures), and with BMS_LOGIN_FAILURE_LIMIT set so
high that it never locks (the site before the fix). Prints attempts before the first 429 and
the kiosk's latency (p50/p95/max) before and during each flood.

    REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python bench/login_flood.py [--attempts 300]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
USER, PASSWORD = "estates", "a-long-correct-password-1"
SETUP = f"""
from django.contrib.auth.models import User
from displays.models import Display
u = User.objects.create_user({USER!r}, password={PASSWORD!r}, is_staff=True)
Display.objects.get_or_create(slug="lobby", defaults=dict(title="Lobby", public=True))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_site(env: dict, port: int, log: Path) -> subprocess.Popen:
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([py, "manage.py", "shell", "-c", SETUP], cwd=ROOT, env=env, check=True)
    proc = subprocess.Popen(
        [str(Path(py).parent / "gunicorn"), "bms.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", "3", "--threads", "4", "--timeout", "30"],
        cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get(port, "/kiosk/lobby/data.json")
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"gunicorn did not start; see {log}")


def get(port: int, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status}")
    return time.perf_counter() - started


def login_form(port: int) -> tuple[str, str]:
    """The CSRF cookie and form token every login POST needs."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/admin/login/")
    response = conn.getresponse()
    body = response.read().decode()
    cookie = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie", "")).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)
    return cookie, token


def wrong_login(port: int, cookie: str, token: str, n: int) -> tuple[int, int]:
    body = urlencode({"username": USER, "password": f"guess-{n}", "csrfmiddlewaretoken": token})
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Cookie": f"csrftoken={cookie}",
        "Referer": f"http://127.0.0.1:{port}/admin/login/",
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/admin/login/", body, headers)
    response = conn.getresponse()
    response.read()
    return n, response.status


def read_kiosk(port: int, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        out.append(get(port, "/kiosk/lobby/data.json"))


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"n={len(ms)} p50={statistics.median(ms):.0f} ms p95={p95:.0f} ms max={ms[-1]:.0f} ms"


def run(label: str, env: dict, args) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bms-login-flood-"))
    port = free_port()
    env = {**env, "BMS_DATA_DIR": str(scratch), "DATABASE_URL": f"sqlite:///{scratch}/db.sqlite3"}
    proc = start_site(env, port, scratch / "gunicorn.log")
    try:
        baseline: list[float] = []
        stop = threading.Event()
        reader = threading.Thread(target=read_kiosk, args=(port, stop, baseline))
        reader.start()
        time.sleep(args.baseline)
        stop.set()
        reader.join()

        during: list[float] = []
        stop = threading.Event()
        reader = threading.Thread(target=read_kiosk, args=(port, stop, during))
        cookie, token = login_form(port)
        reader.start()
        started = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            # in the order they were answered, to see how many got through before the lockout
            futures = [
                pool.submit(wrong_login, port, cookie, token, n) for n in range(args.attempts)
            ]
            results = [f.result() for f in as_completed(futures)]
        flood_s = time.monotonic() - started
        stop.set()
        reader.join()
        statuses = [status for _, status in results]
        checked = statuses.count(200)  # the form again with "wrong password": a hash was run
        first_429 = next((i for i, (_, s) in enumerate(results) if s == 429), None)
        others = sorted({s for s in statuses if s not in (200, 429)})
        print(f"\n== {label}")
        print(f"   {args.attempts} wrong passwords, {args.clients} at a time, in {flood_s:.1f} s")
        print(
            f"   answered 200 (password checked): {checked}; 429 (locked): "
            f"{statuses.count(429)}; other: {len(statuses) - checked - statuses.count(429)}"
        )
        print(f"   first 429 as answer #{first_429 + 1 if first_429 is not None else '-'}")
        print(f"   kiosk before: {summary(baseline)}")
        print(f"   kiosk during: {summary(during)}")
        if others:
            errors = [line for line in (scratch / "gunicorn.log").read_text().splitlines()
                      if "Error" in line or "error" in line]  # fmt: skip
            print("   server errors:", *sorted(set(errors))[-5:], sep="\n     ")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--baseline", type=float, default=5.0)
    args = parser.parse_args()
    if not 1 <= args.attempts <= 10_000 or not 1 <= args.clients <= 64:
        parser.error("--attempts 1..10000, --clients 1..64")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(DJANGO_SETTINGS_MODULE="bms.settings", DEBUG="false", LOG_LEVEL="WARNING",
               SECRET_KEY="bench-" + "x" * 50, BMS_WATCHDOG_WATCH_BEAT="false")  # fmt: skip
    run("lockout on (BMS_LOGIN_FAILURE_LIMIT=5, the default)", env, args)
    run("lockout off (limit 1000000: as before the fix)",
        {**env, "BMS_LOGIN_FAILURE_LIMIT": "1000000"}, args)  # fmt: skip


if __name__ == "__main__":
    main()
