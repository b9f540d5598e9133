"""The production shape, for tests/security/test_proxy.py and bench/attacks.py: the shipped
docker/nginx.conf with what only a container has (ports, paths, user, and optionally shorter
client timeouts) replaced, so Debian's nginx package can run it, and gunicorn sized as
docker/entrypoint.sh sizes it. No pytest and no Django here."""

from __future__ import annotations

import getpass
import re
import socket
import subprocess
from pathlib import Path

from tests.wait import wait_for

DOCKER = Path(__file__).resolve().parents[1] / "docker"


def proxy_conf(
    shipped: str, *, upstream_port: int, http_port: int, https_port: int, cert_dir: Path,
    static_dir: Path, prefix: Path, timeout_s: int | None,
) -> str:  # fmt: skip
    """The shipped conf with what only a container has (ports, paths, user) replaced, and every
    client timeout set to `timeout_s` (None: as shipped). Every replaced line must be there
    exactly as expected, so a test or bench fails if the conf drifts."""
    replace = [
        ("user nginx;", f"user {getpass.getuser()};", 1),
        ("pid /var/run/nginx.pid;", f"pid {prefix}/nginx.pid;", 1),
        ("/var/log/nginx/", f"{prefix}/", 2),
        ("server web:8000;", f"server 127.0.0.1:{upstream_port};", 1),
        ("listen 80;", f"listen 127.0.0.1:{http_port};", 1),
        ("listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;", 1),
        ("/etc/nginx/certs/fullchain.pem", f"{cert_dir}/server.pem", 1),
        ("/etc/nginx/certs/privkey.pem", f"{cert_dir}/server.key", 1),
        ("alias /usr/share/bms/static/;", f"alias {static_dir}/;", 1),
        # Debian's nginx keeps its temp files under /var/lib/nginx: ours go in the prefix.
        (
            "http {\n",
            "http {\n" + "".join(
                f"    {kind}_temp_path {prefix}/{kind};\n"
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            ),
            1,
        ),
    ]  # fmt: skip
    if timeout_s is not None:
        replace += [
            ("client_header_timeout 10s;", f"client_header_timeout {timeout_s}s;", 1),
            ("client_body_timeout 10s;", f"client_body_timeout {timeout_s}s;", 1),
            ("send_timeout 10s;", f"send_timeout {timeout_s}s;", 1),
            ("keepalive_timeout 15s;", f"keepalive_timeout {timeout_s}s;", 1),
        ]
    for old, new, count in replace:
        if shipped.count(old) != count:
            raise ValueError(f"docker/nginx.conf no longer has {old!r} x{count}")
        shipped = shipped.replace(old, new)
    return shipped


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 30) -> None:
    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    wait_for(listening, timeout_s, f"a listener on {port}", every_s=0.05,
             state=lambda: log.read_text()[-2000:])  # fmt: skip


def gunicorn_args() -> list[str]:
    """gunicorn's sizing as docker/entrypoint.sh has it (WEB_WORKERS defaults to 3)."""
    entry = (DOCKER / "entrypoint.sh").read_text()
    workers = re.search(r'--workers "\$\{WEB_WORKERS:-(\d+)\}"', entry).group(1)
    threads = re.search(r"--threads (\d+)", entry).group(1)
    timeout = re.search(r"--timeout (\d+)", entry).group(1)
    return ["--workers", workers, "--threads", threads, "--timeout", timeout]
