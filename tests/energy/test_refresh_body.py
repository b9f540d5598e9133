"""POST /api/v1/energy/refresh with a JSON body that is not an object: a 400, not a 500
(found by tests/fuzz/test_api_schema.py: `_site` called `.get` on an int)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("body", ["0", "[1, 2]", '"site"'])
def test_refresh_refuses_a_body_that_is_not_an_object(engineer_api, body):
    response = engineer_api.post("/api/v1/energy/refresh", body, content_type="application/json")
    assert response.status_code == 400
    assert "body" in response.json()["error"]


def test_refresh_still_names_a_missing_site(engineer_api):
    response = engineer_api.post("/api/v1/energy/refresh", {}, format="json")
    assert response.status_code == 400
    assert "site" in response.json()["error"]
