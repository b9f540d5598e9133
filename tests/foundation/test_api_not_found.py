"""Unknown API paths answer JSON 404s like every other API answer; pages keep the HTML 404."""

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/no-such-thing", "/api/v1/alarms/x/y/z", "/api/nope"])
def test_an_unknown_api_path_is_a_json_404_naming_the_path(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["success"] is False and body["field"] == "path"
    assert path in body["error"]


@pytest.mark.django_db
def test_an_unknown_page_stays_an_html_404(client):
    response = client.get("/staff/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
