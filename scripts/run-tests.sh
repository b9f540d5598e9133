#!/usr/bin/env bash
# Set up everything and run the whole test suite. Extra arguments go to pytest.
#   bash scripts/run-tests.sh            # SQLite (default)
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bms bash scripts/run-tests.sh
set -o errexit -o pipefail -o nounset
source "$(dirname "$0")/setup.sh"
bms_setup --for-tests
say "Running tests on ${DATABASE_URL:-SQLite}"
exec "$PY" -m pytest "$@"
