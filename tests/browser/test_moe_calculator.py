"""The expert-parallelism calculator on the model-parallelism lesson in Chromium: it renders from its props, computes
the hand-worked figures (Mixtral 8x7B on 8 devices: one expert each, 64 tokens an expert from 256), reacts to its
inputs, and refuses a device count the experts do not divide over, saying why."""
from __future__ import annotations

from pathlib import Path

import pytest

from courseapp.loader import load_course

pytestmark = [pytest.mark.browser]

CONTENT = Path(__file__).resolve().parents[2] / "content"


def out(calc, key: str) -> str:
    return calc.locator(f'dd[data-out="{key}"]').inner_text()


def test_moe_calculator_computes_and_refuses(transactional_db, live_server, browser_page):
    load_course(CONTENT)
    page = browser_page
    page.goto(f"{live_server.url}/modules/model-parallelism/")
    calc = page.locator('.calculator[data-calculator="moe-experts"]')
    calc.locator(".js-plotly-plot").wait_for()
    assert out(calc, "perDevice") == "1" and out(calc, "perExpert") == "64.0"
    assert out(calc, "active") == "11.3 B of 45.1 B (25.0%)"
    assert "each device sends and receives" in calc.locator(".ilab-calc__summary").inner_text()
    calc.get_by_label("Model").select_option("deepseek-v3")
    assert out(calc, "perDevice") == "32" and out(calc, "perExpert") == "8.0"  # 256 tokens × 8 ÷ 256 experts
    calc.get_by_label("Devices (expert parallel)").fill("3")
    assert "do not divide evenly over 3 devices" in calc.locator(".ilab-calc__status").inner_text()
    assert out(calc, "perDevice") == "32"  # the last valid figures stay until the input is fixed
