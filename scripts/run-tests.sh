#!/usr/bin/env bash
# Set up everything and run the whole test suite. Extra arguments go to pytest.
#   bash scripts/run-tests.sh            # SQLite (default)
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bms bash scripts/run-tests.sh
#   BMS_TEST_WORKERS=1 bash scripts/run-tests.sh   # one process (default: 3, pytest-xdist)
# With several workers (--dist worksteal) each worker is handed a share of the tests and a worker
# that runs out takes half of the share of one still busy; each worker has its own Redis db and
# data dir (bms/settings_test.py). Not --dist load: it hands each worker one slice of the tests in
# collection order at the start and never moves it, so the first worker got every long test
# (tests/conftest.py, LONG_FIRST) and ran alone for its last ten minutes. Not --dist loadfile:
# schemathesis gives all its generated fuzz tests one node id, and loadfile ran only one of the
# 183. Most of the suite's time is spent waiting on real processes (workers, beat, servers,
# Chromium), so three workers finish sooner than two on two cores (docs/INSTALL.md has the figures).
set -o errexit -o pipefail -o nounset
source "$(dirname "$0")/setup.sh"
bms_setup --for-tests
say "Running tests on ${DATABASE_URL:-SQLite}"
WORKERS="${BMS_TEST_WORKERS:-3}"
if [ "$WORKERS" -gt 1 ]; then
  exec "$PY" -m pytest -n "$WORKERS" --dist worksteal "$@"
fi
exec "$PY" -m pytest "$@"
