"""emoncms itself, running beside our tests: its PHP code under PHP's built-in server.

For differential tests (tests/integration/test_emoncms_live_differential.py): the same traffic
goes to emoncms and to us, and the PHPFina files both write are compared slot by slot.

emoncms's code is not part of this project. It is found at `EMONCMS_DIR` (default
/work/emoncms-src, else ../emoncms-src beside the checkout) and never modified: emoncms reads
settings.ini from its own root (process_settings.php looks beside itself), so each run builds a
temporary overlay directory of symlinks to emoncms's files, with a copy of process_settings.php
(PHP resolves symlinks in __FILE__, so a symlinked copy would look in emoncms's own root) and a
settings.ini of ours. The overlay runs with:

- a fresh MariaDB database at 127.0.0.1:3306 (root, no password), dropped afterwards; emoncms
  creates its tables on the first request (`sql dbtest = true`);
- a redis-server of its own on a free port (emoncms keeps input values and process state there,
  as on an emonSD), with the write buffer off (`redisbuffer enabled = false`), so every post is
  written to its PHPFina files at once;
- `php -S` with tests/emoncms_router.php, which sets `q` from the path as emoncms's .htaccess does.

`skip_reason()` says why it cannot run here (no php, a missing PHP extension, no emoncms
checkout, no redis-server, no MariaDB); tests skip with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from tests.live_http import free_port
from tests.processes import stop_process
from tests.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent
ROUTER = Path(__file__).resolve().parent / "emoncms_router.php"
MARIADB = ("127.0.0.1", "3306", "root")
# emoncms's index.php dies without these (and php-mbstring for its string helpers).
PHP_EXTENSIONS = ("mysqli", "redis", "gettext", "mbstring")
REQUEST_TIMEOUT_S = 30


def emoncms_dir() -> Path | None:
    """The emoncms checkout: EMONCMS_DIR if set (and only it), else /work/emoncms-src, else
    ../emoncms-src beside this checkout; None when it is not there."""
    given = os.environ.get("EMONCMS_DIR")
    candidates = [given] if given else ["/work/emoncms-src", ROOT.parent / "emoncms-src"]
    for candidate in candidates:
        if (Path(candidate) / "Modules" / "input" / "input_methods.php").is_file():
            return Path(candidate)
    return None


def _mysql_client() -> str | None:
    return shutil.which("mariadb") or shutil.which("mysql")


def _mysql(sql: str) -> subprocess.CompletedProcess:
    host, port, user = MARIADB
    return subprocess.run(
        [_mysql_client(), "-h", host, "-P", port, "-u", user, "-e", sql],
        capture_output=True, text=True, timeout=REQUEST_TIMEOUT_S,
    )  # fmt: skip


def skip_reason() -> str | None:
    """Why emoncms cannot run on this machine, or None when it can."""
    if emoncms_dir() is None:
        where = os.environ.get("EMONCMS_DIR") or "/work/emoncms-src or ../emoncms-src"
        return f"no emoncms checkout at {where} (set EMONCMS_DIR to emoncms's source, v11.16.8)"
    if shutil.which("php") is None:
        return (
            "php is not installed (Debian: apt-get install php-cli; scripts/setup.sh --for-tests)"
        )
    loaded = subprocess.run(["php", "-m"], capture_output=True, text=True).stdout.lower().split()
    missing = [ext for ext in PHP_EXTENSIONS if ext not in loaded]
    if missing:
        return f"php lacks extension(s) {', '.join(missing)} (Debian: php-mysql php-redis php-mbstring)"
    if shutil.which("redis-server") is None:
        return "redis-server is not installed"
    if _mysql_client() is None:
        return "no mariadb/mysql client"
    if _mysql("SELECT 1").returncode != 0:
        return "MariaDB does not answer at 127.0.0.1:3306 (root, no password)"
    return None


SETTINGS_INI = """\
emoncms_dir = "{app}"
display_errors = false
[sql]
server = "{host}"
database = "{database}"
username = "{user}"
password = ""
port = {port}
dbtest = true
[redis]
enabled = true
host = '127.0.0.1'
port = {redis_port}
prefix = 'emoncms'
[mqtt]
enabled = false
[feed]
redisbuffer[enabled] = false
phpfina[datadir] = '{data}/phpfina/'
phptimeseries[datadir] = '{data}/phptimeseries/'
[log]
enabled = true
location = '{log}'
level = 2
"""


class Emoncms:
    """One emoncms on free ports with its own database, Redis and data dir; `start()`, `stop()`."""

    def __init__(self) -> None:
        source = emoncms_dir()
        assert source is not None, skip_reason()
        self.source = source
        self.tmp = Path(tempfile.mkdtemp(prefix="emoncms-"))
        self.app = self.tmp / "app"
        self.datadir = self.tmp / "data" / "phpfina"
        self.database = "emoncms_test_" + uuid.uuid4().hex[:12]
        self.port = free_port()
        self.redis_port = free_port()
        self.apikey = ""
        self._php: subprocess.Popen | None = None
        self._redis: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _overlay(self) -> None:
        self.app.mkdir()
        for entry in self.source.iterdir():
            if entry.name not in ("process_settings.php", "settings.ini", "settings.php"):
                (self.app / entry.name).symlink_to(entry)
        shutil.copy(self.source / "process_settings.php", self.app / "process_settings.php")
        (self.tmp / "log").mkdir()
        self.datadir.mkdir(parents=True)
        (self.tmp / "data" / "phptimeseries").mkdir()
        host, port, user = MARIADB
        (self.app / "settings.ini").write_text(
            SETTINGS_INI.format(
                app=self.app, host=host, port=port, user=user, database=self.database,
                redis_port=self.redis_port, data=self.tmp / "data", log=self.tmp / "log",
            )
        )  # fmt: skip

    def start(self) -> None:
        self._overlay()
        created = _mysql(f"CREATE DATABASE `{self.database}`")
        assert created.returncode == 0, created.stderr
        self._redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        log = open(self.tmp / "php.log", "ab")  # the child keeps its own copy
        self._php = subprocess.Popen(
            ["php", "-S", f"127.0.0.1:{self.port}", "-t", str(self.app), str(ROUTER)],
            cwd=self.app, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        wait_for(self._answers, 30, f"emoncms under php -S on port {self.port}",
                 state=self.log_tail)  # fmt: skip
        user = "difftest"
        registered = self.call(
            "user/register.json",
            post={"username": user, "password": "difftest-pass-1", "email": "d@example.com",
                  "timezone": "UTC"},
        )  # fmt: skip
        assert registered.get("success"), registered
        self.apikey = registered["apikey_write"]

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/version", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def log_tail(self) -> str:
        path = self.tmp / "php.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        for proc in (self._php, self._redis):
            if proc is not None:
                stop_process(proc, timeout_s=10)
        _mysql(f"DROP DATABASE IF EXISTS `{self.database}`")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the API, as a client calls it --------------------------------------------------

    def request(self, path: str, params: dict | None = None, post: dict | None = None) -> str:
        """GET (or POST the form `post`) `path` with the write apikey; the body as text."""
        query = dict(params or {})
        if self.apikey:
            query.setdefault("apikey", self.apikey)
        url = f"{self.url}/{path}?{urllib.parse.urlencode(query)}"
        data = urllib.parse.urlencode(post).encode() if post is not None else None
        with urllib.request.urlopen(url, data=data, timeout=REQUEST_TIMEOUT_S) as r:
            return r.read().decode()

    def call(self, path: str, params: dict | None = None, post: dict | None = None):
        body = self.request(path, params, post)
        try:
            return json.loads(body)
        except ValueError as error:
            raise AssertionError(f"emoncms {path}: not JSON: {body[:500]!r}") from error

    def create_feed(self, name: str, interval: int = 10) -> int:
        made = self.call(
            "feed/create.json",
            {"tag": "diff", "name": name, "engine": 5, "options": json.dumps({"interval": interval})},
        )  # fmt: skip
        assert made.get("success"), made
        return int(made["feedid"])

    def inputs(self) -> dict[tuple[str, str], int]:
        """(node, name) -> input id."""
        listed = self.call("input/list.json")
        return {(str(i["nodeid"]), str(i["name"])): int(i["id"]) for i in listed}

    def set_processlist(self, input_id: int, steps: list[tuple[str, list]]) -> None:
        """Steps as (emoncms function name, args), e.g. ("log_to_feed", [3])."""
        processlist = [{"fn": f"process__{fn}", "args": args} for fn, args in steps]
        result = self.call(
            "input/process/set.json", {"inputid": input_id},
            post={"processlist": json.dumps(processlist)},
        )  # fmt: skip
        assert result.get("success"), result

    def feed_file(self, feed_id: int) -> tuple[Path, Path]:
        return self.datadir / f"{feed_id}.meta", self.datadir / f"{feed_id}.dat"
