"""This machine and its processes as Linux's /proc tells them (None or "" where it cannot).

Used where data must not outlive what it belongs to: the feed buffer's offsets of unsynced
writes belong to one boot (the page cache), a Redis lock to one live process (core/redis_lock.py).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


@functools.cache
def boot_id() -> str | None:
    """The kernel's boot id: another one after every reboot."""
    try:
        return Path(BOOT_ID_FILE).read_text().strip()
    except OSError:
        return None  # not Linux


@functools.cache
def pid_namespace() -> str | None:
    """This process's PID namespace: containers on one host share the boot id but not it, and
    a pid means something else in another one."""
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return None


def process_identity(pid: int | None = None) -> str:
    """ "<boot id>:<pid namespace>:<pid>:<start time>" of a live process of this machine and
    namespace; "" for a dead one (a zombie included) or where /proc cannot tell."""
    pid = os.getpid() if pid is None else pid
    if boot_id() is None or pid_namespace() is None:
        return ""
    try:
        # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    if fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent or init: dead
        return ""
    return f"{boot_id()}:{pid_namespace()}:{pid}:{fields[19]}"  # field 22: start time, ticks
