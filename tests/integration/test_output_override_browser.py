"""An operator holds an analogue output on the staff page in real Chromium, sees it held (the
control ticks run in a real Celery worker, the output goes to a Modbus TCP board in its own
process), then cancels it and sees weather compensation take the output back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page

from core.roles import ENGINEERS
from tests.browser import logged_in_page
from tests.integration.test_control_worker import tick
from tests.integration.test_weather_worker import BoardProcess, mixing_plant
from tests.live_http import KioskServer
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PASSWORD = "browser-test-pw"


@pytest.fixture
def board(tmp_path):
    b = BoardProcess(tmp_path / "writes.jsonl")
    yield b
    stop_process(b.proc, timeout_s=5)


@pytest.fixture
def plant(transactional_db, celery_worker, redis_client, board):
    operator = User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    operator.groups.add(Group.objects.get(name=ENGINEERS))
    plant, _flow = mixing_plant(
        board, output="register", register_host=board.host, register_port=board.port,
        register_address=5, raw_min=0, raw_max=10000,
    )  # fmt: skip
    tick()  # the first output: 65 % from the curve and the PI loop
    assert board.register(5) == 6500
    return plant


@pytest.fixture
def server(plant) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def _row(page: Page, plant) -> str:
    page.reload()
    return page.inner_text(f"#circuit-{plant.pk}")


def _wait_for_register(board: BoardProcess, value: int, timeout_s: float = 30.0) -> None:
    wait_for(lambda: board.register(5) == value, timeout_s, f"register 5 to read {value}")


def test_an_operator_holds_an_analogue_output_sees_it_and_cancels_it(server, plant, board):
    viewport = {"width": 1400, "height": 1000}
    with logged_in_page(server.url, "operator", PASSWORD, "/staff/control/", viewport) as (
        page,
        seen,
    ):
        row = page.inner_text(f"#circuit-{plant.pk}")
        assert "65 %" in row and "weather compensation" in row and "50.0 °C" in row

        form = page.locator("#output-override-form")
        form.locator("select[name=plant]").select_option(str(plant.pk))
        form.locator("input[name=value]").fill("30")
        form.locator("input[name=minutes]").fill("45")
        form.locator("input[name=reason]").fill("Balancing the radiators")
        form.locator("button").click()
        page.wait_for_url("**/staff/control/")
        assert "Output override set" in page.inner_text("body")

        tick()  # the worker applies it
        _wait_for_register(board, 3000)
        row = _row(page, plant)
        assert "30 %" in row and "manual override by operator" in row, row
        assert "Balancing the radiators" in row

        page.locator(f"#circuit-{plant.pk} button", has_text="Cancel override").click()
        page.wait_for_url("**/staff/control/")
        assert "Output override cancelled" in page.inner_text("body")
        tick()
        wait_for(lambda: board.register(5) != 3000, 30, "the output released after the cancel")
        row = _row(page, plant)
        assert "weather compensation" in row and "manual override" not in row, row
        assert page.locator(f"#circuit-{plant.pk} button").count() == 0
        assert seen["errors"] == []
