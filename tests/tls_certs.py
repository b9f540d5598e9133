"""A throw-away CA and a server certificate for 127.0.0.1, made by the openssl command, for the
tests that run a real TLS server (Mosquitto's TLS listener, the nginx proxy)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca_and_server_cert(directory: Path, san: str = "IP:127.0.0.1") -> None:
    """ca.pem, and server.pem/server.key for 127.0.0.1 (IP SAN) signed by it, in `directory`.
    `san` names the server otherwise (e.g. "DNS:calendar.test": a host name only)."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=directory)  # fmt: skip
    (directory / "san.ext").write_text(f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem",
             cwd=directory)  # fmt: skip
