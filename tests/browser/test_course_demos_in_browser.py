"""The course's own live demos (prefill-decode, flash-attention, serving-load) in a real browser against the
real stack (Daphne + Celery worker + Redis), with small settings so each run takes seconds."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(420)]

SCREENSHOTS = Path(os.environ.get("DEMO_SCREENSHOT_DIR", settings.BASE_DIR / "var" / "screenshots"))


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def run_and_wait(page, stack, timeout=150_000) -> None:
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => ['done','error','cancelled'].includes(document.querySelector('.ilab-demo').dataset.state)",
                           timeout=timeout)
    state = page.evaluate("document.querySelector('.ilab-demo').dataset.state")
    assert state == "done", page.locator(".ilab-calc__status").first.inner_text() + stack.log(stack.worker)[-3000:]


def out(page, key: str) -> str:
    return page.locator(f'dd[data-out="{key}"]').inner_text()


@pytest.mark.django_db(transaction=True)
def test_course_demos_run_and_chart(live_stack, browser_page):
    page = browser_page

    page.goto(f"{live_stack.url}/demos/prefill-decode/")
    page.get_by_label("Repeat the prompt").fill("2")
    page.get_by_label("New tokens").fill("3")
    run_and_wait(page, live_stack)
    assert out(page, "ttft").endswith("ms") and out(page, "decodeBw").endswith("B/s")
    bars = page.evaluate("document.querySelectorAll('.ilab-calc__chart')[0].data[0].x.length")
    assert bars == 3  # one bar per forward: the prefill and two decode steps
    shot(page, "prefill-decode-demo")

    page.goto(f"{live_stack.url}/demos/flash-attention/")
    page.get_by_label("Tile size").fill("4")
    run_and_wait(page, live_stack)
    assert float(out(page, "diff")) < 1e-4
    assert "/" in out(page, "tiles") and int(out(page, "tiles").split("/")[1]) > 0  # causal tiles were skipped
    shot(page, "flash-attention-demo")

    page.goto(f"{live_stack.url}/demos/serving-load/")
    page.get_by_label("Requests").fill("2")
    page.get_by_label("Tokens per request").fill("3")
    page.get_by_label("Scheduling").select_option("sequential")
    run_and_wait(page, live_stack)
    assert page.locator("table").first.locator("tbody tr").count() == 2
    assert out(page, "mode") == "Sequential" and out(page, "throughput").endswith("tokens/s")
    page.get_by_label("Scheduling").select_option("batched")
    run_and_wait(page, live_stack)
    assert page.locator("table").nth(1).locator("tbody tr").count() == 2  # both runs listed for comparison
    # Both modes timed in alternating repeats within the run: the chart draws their medians and spreads, the table
    # beside it the forward passes that explain them (2 requests arriving together: half the passes, 2 per pass).
    table = page.locator("table.ilab-compare-timing")
    assert table.locator("thead th").all_inner_texts()[1:] == ["batched", "sequential"]
    counters = {row.locator("th").inner_text(): row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()}
    assert counters["forward passes"] == ["3", "6"] and counters["most sequences sharing one forward pass"] == ["2", "1"]
    bars = page.evaluate("""() => [...document.querySelectorAll('.ilab-calc__chart')]
      .find((c) => c.getAttribute('aria-label').startsWith('Bar chart: time until every request'))
      .data.map((t) => [t.x[0], t.error_y.arrayminus[0] >= 0 && t.error_y.array[0] >= 0])""")
    assert bars == [["batched", True], ["sequential", True]]
    assert page.locator("table").nth(1).locator("tbody tr td:last-child").last.inner_text().count("ms") == 2
    shot(page, "serving-load-demo")
    assert not page.errors, page.errors
