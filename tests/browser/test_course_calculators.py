"""The course calculators on the real lesson pages in Chromium: they render, compute the hand-worked figures
and react to input. Served by Django's live server (static files included); no engine or worker needed."""
from __future__ import annotations

from pathlib import Path

import pytest

from courseapp.loader import load_course

pytestmark = [pytest.mark.browser]

CONTENT = Path(__file__).resolve().parents[2] / "content"


@pytest.fixture
def course_url(transactional_db, live_server):
    load_course(CONTENT)
    return live_server.url


def out(calc, key: str) -> str:
    return calc.locator(f'dd[data-out="{key}"]').inner_text()


def test_calculators_compute_and_react(course_url, browser_page):
    page = browser_page

    page.goto(f"{course_url}/modules/kv-cache/")
    kv = page.locator('.calculator[data-calculator="kv-size"]')
    kv.locator("table tbody tr").first.wait_for()
    assert out(kv, "perToken").startswith("128 KiB")  # Llama 3 8B, bf16
    assert out(kv, "perSeq") == "512 MiB"  # 0.5 GiB at 4K tokens
    rows = kv.locator("table tbody tr").all_inner_texts()
    assert "512 KiB" in rows[0] and "128 KiB" in rows[1] and "16 KiB" in rows[2]  # MHA, GQA, MQA
    kv.get_by_label("Model").select_option("llama-3-70b")
    assert out(kv, "perToken").startswith("320 KiB")
    kv.get_by_label("KV heads").fill("64")  # full multi-head attention
    assert out(kv, "perToken").startswith("2.5 MiB")
    assert kv.locator(".js-plotly-plot").count() == 1

    page.goto(f"{course_url}/modules/gpu-bandwidth/")
    mem = page.locator('.calculator[data-calculator="gpu-memory"]')
    mem.locator('dd[data-out="gpus"]').wait_for()
    assert out(mem, "weights") == "141 GB"
    mem.get_by_label("Weight precision").select_option("int4")
    assert out(mem, "gpus") == "1 (80 GB)"
    chooser = page.locator('.calculator[data-calculator="deployment-chooser"]')
    chooser.get_by_label("Where will it run?").select_option("laptop")
    assert chooser.locator("li").first.get_attribute("data-rec") == "llama-cpp"

    page.goto(f"{course_url}/modules/prefill-decode/")
    roof = page.locator('.calculator[data-calculator="roofline"]')
    roof.locator("table tbody tr").first.wait_for()
    assert roof.locator("table tbody tr").count() == 4  # A100, H100, H200 and the course server
    server_row = roof.locator("table tbody tr").nth(3).inner_text()  # no worker has measured: the recorded profile
    assert server_row.startswith("This server (") and "(recorded " in server_row and "machine_roofline.py" in server_row
    assert "0.3% of peak" in roof.locator("table tbody tr").nth(1).inner_text()  # H100 decode at batch 1
    roof.get_by_label("Decode batch size").fill("512")
    assert "of peak" in roof.locator(".ilab-calc__summary").first.inner_text()
    assert not page.errors, page.errors
