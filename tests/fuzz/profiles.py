"""Hypothesis settings for the fuzz tests, chosen by the HYPOTHESIS_PROFILE environment variable.

`fuzz` (default): modest example counts so the default suite stays fast.
`deep`: 5x, `soak`: 30x more examples for a long run:
    HYPOTHESIS_PROFILE=soak .venv/bin/pytest tests/fuzz tests/security -q

Applied per test (`@FUZZ`, `@API_FUZZ`) rather than loaded globally, so other folders that use
Hypothesis keep their own settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
API_FUZZ = settings(max_examples=6 * _SCALE, **_COMMON)
