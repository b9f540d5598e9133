"""Every shell command in the docs runs, against a real running demo site.

What is run: every fenced block marked ```bash, ```sh, ```shell or ```console in README.md and
docs/*.md (a console block runs only its `$ ` lines). Each block runs in bash with
`set -eo pipefail`, from a scratch directory that looks like the project root (`.venv`,
`manage.py`, `docs/`, `bench/`, `scripts/` and `var/` -> this run's data dir), against:

- a real HTTP server running the Django site on a free port (tests/live_http.py), the real
  Celery worker of the suite, the test database and Redis database;
- the demo site created by `manage.py simulate_site --setup-only` (one day of history);
- a superuser `admin`;
- the shell variables of docs/examples/env.sh: $BMS (the server's base URL), $TOKEN (admin's
  API token), $NODE / $NODE_KEY (the demo node emontx-pv and its write key), $FEED / $KWH_FEED
  (its power and energy feed ids). The docs' examples are written with these variables.

Blocks of one document run in order and share their shell variables (an assignment in one block
is seen by the next), so a document can be followed like a walkthrough. Documents do not share
variables, but they share the site: a document that creates a node must give it a name (and a
radio id) no other document uses. `curl` runs with `--fail-with-body`: an HTTP error fails the
block, as any command that exits non-zero does.

Markers: an HTML comment on the line(s) right above the block, invisible on GitHub:

    <!-- doc-test: skip (needs a Docker engine) -->   not run here; the reason is listed by pytest
    <!-- doc-test: expect "ok" -->                     stdout or stderr must contain this text
                                                       (several expect lines: all must appear)
    <!-- doc-test: fails -->                           the block must exit non-zero (an error
                                                       example; put one failing command in it)

A block that cannot run on a test machine (docker, apt-get, a real serial port, a command that
runs until Ctrl-C) must be marked skip, with a reason, and should have a runnable neighbour
(`--help`, `--duration`, a small input from docs/examples/). An unmarked block that fails fails
the suite; so does an unknown marker, a command in an unfenced (indented) code block, and a doc
not linked from README.md and docs/README.md. New documents (e.g. docs/RELIABILITY.md) are
picked up by the glob: their authors follow the same convention.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, test_database_url
from tests.docs.doc_blocks import (
    Block,
    MarkerError,
    indented_commands,
    markdown_links,
    shell_blocks,
)

pytestmark = pytest.mark.integration

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK_TIMEOUT_S = 90
# Not node_modules: a stray `npm ci` in a doc would empty the repository's copy through a link.
LINKED_FROM_ROOT = ("bench", "docker", "docs", "scripts", "manage.py", ".venv")
APPS = ("bms", "feeds", "sensors", "control", "displays")
LINKED_FILES = ("requirements.txt", "requirements.lock")


def _collect() -> tuple[list[Block], list[str]]:
    blocks, errors = [], []
    for doc in DOCS:
        try:
            blocks.extend(shell_blocks(doc, ROOT))
        except MarkerError as exc:
            errors.append(str(exc))
    return blocks, errors


BLOCKS, MARKER_ERRORS = _collect()

PRELUDE = """\
set -a
. "$DOC_STATE_IN"
set -eo pipefail
trap 'export -p > "$DOC_STATE_OUT"' EXIT
curl() { command curl --silent --show-error --fail-with-body --max-time 30 "$@"; }
"""


@dataclass
class LiveDemo:
    url: str
    cwd: Path
    env: dict[str, str]
    base_state: Path
    states: dict[str, Path] = field(default_factory=dict)

    def run(self, block: Block) -> subprocess.CompletedProcess:
        state_in = self.states.get(block.doc, self.base_state)
        state_out = self.cwd / f".state-{block.doc.replace('/', '_')}"
        script = PRELUDE + block.script()
        env = dict(self.env, DOC_STATE_IN=str(state_in), DOC_STATE_OUT=str(state_out))
        # Its own session, so a block that outlives its timeout (a command that runs until
        # stopped and was not marked skip) is killed with everything it started.
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\n[doc-test] killed after {BLOCK_TIMEOUT_S} s: mark it skip, or shorten it"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the block left running in the background
        except ProcessLookupError:
            pass  # nothing left: the usual case
        result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if state_out.exists():
            self.states[block.doc] = state_out
        return result


def _scratch_root(data_dir: Path) -> Path:
    """A directory that looks like the project root, so files the docs create (a gateway
    config, a backup) land here and not in the repository."""
    cwd = Path(tempfile.mkdtemp(prefix="doc-test-", dir=data_dir))
    for name in LINKED_FROM_ROOT + LINKED_FILES:
        if (ROOT / name).exists():
            (cwd / name).symlink_to(ROOT / name)
    (cwd / "var").symlink_to(data_dir)
    return cwd


@pytest.fixture(scope="module")
def live_demo(celery_worker, django_db_blocker) -> Iterator[LiveDemo]:
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from core.redis import get_redis
    from tests.live_http import KioskServer

    data_dir = Path(os.environ["BMS_DATA_DIR"])
    with django_db_blocker.unblock():
        get_redis().flushdb()
        server = KioskServer()
        call_command(
            "simulate_site",
            "--setup-only",
            "--history-days",
            "1",
            "--base-url",
            server.url,
            stdout=io.StringIO(),
        )
        User.objects.create_superuser("admin", "admin@example.org", "doc-test-admin")
        server.start()
        cwd = _scratch_root(data_dir)
        env = dict(
            os.environ,
            DATABASE_URL=test_database_url(),
            DJANGO_SETTINGS_MODULE="bms.settings_test",
            PYTHONPATH=str(ROOT),
            BMS=server.url,
        )
        # The variables every doc starts with come from the same script the docs tell
        # an engineer to source, so that script is tested too.
        base_state = cwd / ".state-base"
        setup = subprocess.run(
            ["bash", "-c", f'set -ae; . docs/examples/env.sh; export -p > "{base_state}"'],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
        assert setup.returncode == 0, f"docs/examples/env.sh failed:\n{setup.stderr}"
        try:
            yield LiveDemo(server.url, cwd, env, base_state)
        finally:
            server.stop()
            shutil.rmtree(cwd, ignore_errors=True)
            # Other test modules expect an empty database and Redis.
            call_command("flush", interactive=False, verbosity=0)
            get_redis().flushdb()


# The django_db mark makes pytest-django create the test database (it only does for a session
# that has such a test); the site itself lives in the module-scoped `live_demo`, set up before
# this test's (unused, empty) transaction begins and flushed when the module ends.
#
# One test for all blocks, run in the docs' order: a block uses what the blocks before it in
# its doc did (a node's key, a feed id). As one test per block, the suite's parallel workers
# (pytest-xdist) split a doc's blocks between two sites, and a later block found
# no key (session 6). Each failing block is named in the failure, with its output.
@pytest.mark.django_db
def test_doc_blocks(live_demo: LiveDemo) -> None:
    failures, ran = [], 0
    for block in BLOCKS:
        if block.skip:
            continue
        ran += 1
        result = live_demo.run(block)
        output = result.stdout + result.stderr
        report = (
            f"{block.id} ({block.lang}):\n{block.code}\n--- exit {result.returncode}, "
            f"output:\n{output[-4000:]}"
        )
        if block.fails and result.returncode == 0:
            failures.append("marked `fails` but succeeded: " + report)
        elif not block.fails and result.returncode != 0:
            failures.append(report)
        failures += [
            f'expected "{fragment}" in the output of ' + report
            for fragment in block.expect
            if fragment not in output
        ]
    assert ran > 0
    assert failures == [], "\n\n".join(failures)


SKIPPED_BLOCKS = [b for b in BLOCKS if b.skip]


@pytest.mark.parametrize("block", SKIPPED_BLOCKS, ids=[b.id for b in SKIPPED_BLOCKS])
def test_doc_block_not_run(block: Block) -> None:
    """Lists each block the docs test does not run, with its reason, in the test report."""
    pytest.skip(f"{block.id}: {block.skip}")


def test_markers_are_understood() -> None:
    assert MARKER_ERRORS == []


def test_every_skip_gives_a_reason() -> None:
    skipped = [b for b in BLOCKS if b.skip is not None]
    assert all(b.skip.strip() for b in skipped)
    # Most of the docs must actually run: a skip is the exception.
    assert len(skipped) < len(BLOCKS) / 3, [b.id for b in skipped]


def test_no_command_hides_in_an_indented_block() -> None:
    found = [line for doc in DOCS for line in indented_commands(doc, ROOT)]
    assert found == [], "fence these as ```bash so the harness runs them"


def test_every_doc_is_linked_from_both_indexes() -> None:
    docs = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    from_readme = {
        Path(t).name for t in markdown_links(ROOT / "README.md") if t.startswith("docs/")
    }
    from_index = {Path(t).name for t in markdown_links(ROOT / "docs" / "README.md")}
    assert docs - from_readme == set(), "not linked from README.md's Documentation list"
    assert docs - from_index == set(), "not linked from docs/README.md"


def test_relative_links_resolve() -> None:
    broken = [
        f"{doc.relative_to(ROOT)} -> {target}"
        for doc in DOCS
        for target in markdown_links(doc)
        if target and not (doc.parent / target).exists()
    ]
    assert broken == []


def _raised_alarm_keys() -> set[str]:
    """Every alarm key, or key prefix, the code raises. In each module that calls
    raise_alarm (or count_alarm): the f-string keys (`f"node-silent:{node.id}"`, also in helpers such as
    `alarm_key()` -> `f"relay:{...}"`) and module constants passed to it
    (`BEAT_ALARM = "celery-beat"`)."""
    keys: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if ("raise_alarm(" not in text and "count_alarm(" not in text) or (
                "migrations" in path.parts
            ):
                continue
            keys.update(re.findall(r'f"([a-z][a-z0-9-]*):\{', text))
            for name in re.findall(r"raise_alarm\(\s*([A-Z][A-Z0-9_]*)\s*,", text):
                keys.update(re.findall(rf'^{name} = "([^"]+)"', text, re.M))
    return keys


def test_every_alarm_is_documented() -> None:
    keys = _raised_alarm_keys()
    assert {"node-silent", "relay"} <= keys, "the scan no longer finds raise_alarm calls"
    text = (ROOT / "docs" / "ALARMS.md").read_text(encoding="utf-8")
    missing = sorted(k for k in keys if f"`{k}:" not in text and f"`{k}`" not in text)
    assert missing == [], "describe these alarms in docs/ALARMS.md's table"
