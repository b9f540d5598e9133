"""Helpers for tests that run real processes (Celery worker, beat, the simulator)."""

from __future__ import annotations

import signal
import subprocess


def stop_process(proc: subprocess.Popen, timeout_s: float = 15) -> None:
    """Ask the process to stop (SIGTERM, as systemd or docker would); kill it if it will not."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
