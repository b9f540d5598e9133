"""Hypothesis settings for the fuzz tests, chosen by the HYPOTHESIS_PROFILE environment variable.

`fuzz` (default): modest example counts, and schemathesis without its coverage phase, so the
default suite stays fast.
`deep`: 5x, `soak`: 30x more examples and the coverage phase, for a long run:
    HYPOTHESIS_PROFILE=soak .venv/bin/pytest tests/fuzz tests/security -q

Applied per test (`@FUZZ`, `@API_FUZZ`) rather than loaded globally, so other folders that use
Hypothesis keep their own settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fuzz")
_SCALE = {"fuzz": 1, "deep": 5, "soak": 30}.get(PROFILE, 1)
# No per-example deadline: the shared 2-core machine has pauses that are not our bugs;
# response-time bounds are asserted explicitly where they matter.
_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    "derandomize": False,
}

# Pure parsers and the feed engine: cheap examples.
FUZZ = settings(max_examples=50 * _SCALE, **_COMMON)
# One HTTP request per example (in-process WSGI): fewer.
API_FUZZ = settings(max_examples=12 * _SCALE, **_COMMON)

# schemathesis's coverage phase sends, for every operation, each field of its body at each of
# its boundaries and wrong types: about 600 requests for each write of a model with many fields
# (zones), 1,070 s of the suite's 4,140 s of test time in CI (2026-11-27), where the fuzzing
# phase sends API_FUZZ's examples. The default run fuzzes; `HYPOTHESIS_PROFILE=deep` (or soak)
# runs the coverage phase too. The bounds themselves have tests of their own
# (tests/security/test_json_bounds.py and each app's bound tests).
API_FUZZ_CONFIG = SchemathesisConfig.from_dict(
    {} if _SCALE > 1 else {"phases": {"coverage": {"enabled": False}}}
)
