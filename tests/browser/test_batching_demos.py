"""Paged-attention, batching and prefix-caching demos in a real browser against the real stack (small settings)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]

SCREENSHOTS = Path(os.environ.get("DEMO_SCREENSHOT_DIR", settings.BASE_DIR / "var" / "screenshots"))


def run_and_wait(page, stack, timeout=240_000) -> None:
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => ['done','error','cancelled'].includes(document.querySelector('.ilab-demo').dataset.state)",
                           timeout=timeout)
    state = page.evaluate("document.querySelector('.ilab-demo').dataset.state")
    assert state == "done", page.locator(".ilab-calc__status").first.inner_text() + stack.log(stack.worker)[-3000:]


def out(page, key: str) -> str:
    return page.locator(f'dd[data-out="{key}"]').inner_text()


def fmt_ms(ms: float) -> str:
    """As the page's fmtMs writes a duration: two decimals under 10 ms, else one."""
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def comparison_chart(page, label_start: str) -> list[list]:
    """The bars of the chart whose name starts with `label_start`: [side, median ms, low ms, high ms] per bar."""
    return page.evaluate("""(start) => {
      const chart = [...document.querySelectorAll('.ilab-calc__chart')].find((c) => (c.getAttribute('aria-label') || '').startsWith(start));
      return chart.data.map((t) => [t.x[0], t.y[0], t.y[0] - t.error_y.arrayminus[0], t.y[0] + t.error_y.array[0]]);
    }""", label_start)


def assert_chart_is_the_comparison(page, label_start: str) -> None:
    """A timing chart draws the comparison's medians and spreads, so it cannot contradict the verdict beside it."""
    timing = comparison(page)
    bars = comparison_chart(page, label_start)
    assert [b[0] for b in bars] == timing["head"]
    for (side, median, low, high), cell, spread in zip(bars, timing["Median"], timing[next(k for k in timing if k.startswith("Spread"))]):
        assert low <= median <= high, (side, low, median, high)
        assert fmt_ms(median) == cell, (side, median, cell)
        assert spread == f"{fmt_ms(low)} – {fmt_ms(high)}", (side, spread)


def comparison(page) -> dict[str, list[str]]:
    """The comparison's table: its column heads (the sides) and each row's cells, by the row's heading."""
    table = page.locator("table.ilab-compare-timing")
    rows = {"head": table.locator("thead th").all_inner_texts()[1:]}
    for row in table.locator("tbody tr").all():
        rows[row.locator("th").inner_text()] = row.locator("td").all_inner_texts()
    return rows


@pytest.mark.django_db(transaction=True)
def test_batching_demos_run_and_chart(live_stack, browser_page):
    page = browser_page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{live_stack.url}/demos/paged-attention/")
    page.get_by_label("Prompts, one per line").fill("The capital of France is\ndef add(a, b):\nOne, two, three,")
    page.get_by_label("New tokens per request").fill("5")
    page.get_by_label("Physical blocks in the pool").fill("6")
    page.get_by_label("Block size (tokens)").select_option("4")
    page.get_by_label("A new request every").fill("0")
    run_and_wait(page, live_stack)
    assert page.locator("table tbody tr").count() == 3
    assert int(out(page, "preempt")) >= 1  # 6 blocks of 4 tokens cannot hold all three at once
    # At the run's end no forward runs, so the slot cards name no step's counts (each step's are checked by
    # test_captions_agree_with_picture.py).
    assert out(page, "contig") == "– (after the run)"
    # The end state is the pool after the frees, as the rows say: not the last step's "1 running requests".
    end = page.get_by_text("After the run:")
    assert end.inner_text() == "After the run: 0 of 6 blocks hold K/V; every request finished and its blocks were freed."
    assert [t.strip() for t in page.locator("table tbody tr td:nth-child(3)").all_inner_texts()] == ["(freed)"] * 3
    assert out(page, "blocks") == "0 / 6"
    page.screenshot(path=str(SCREENSHOTS / "paged-attention-demo.png"), full_page=True)

    page.goto(f"{live_stack.url}/demos/batching/")
    page.get_by_label("Requests: new tokens").fill("5@0, 2@0, 2@1")
    page.get_by_label("Batch size").fill("2")
    run_and_wait(page, live_stack)
    rows = page.locator("table:not(.ilab-compare-timing) tbody tr")
    assert rows.count() == 2 and rows.nth(0).locator("th").inner_text() == "continuous"
    timing = comparison(page)  # both modes timed again in alternating repeats, the waiting steps beside the times
    assert timing["head"] == ["continuous", "static"]
    waited = timing["steps requests waited before their first pass"]
    assert int(waited[0]) < int(waited[1])
    assert page.evaluate("document.querySelectorAll('.ilab-calc__chart')[0].data.length") == 2  # one Gantt per mode
    assert_chart_is_the_comparison(page, "Bar chart: mean time to first token")
    table_times = [cells[4] for cells in (rows.nth(i).locator("td").all_inner_texts() for i in range(2))]
    assert [t.split(" (")[0] for t in table_times] == timing["Median"]  # the results table quotes the repeats too
    page.screenshot(path=str(SCREENSHOTS / "batching-demo.png"), full_page=True)

    page.goto(f"{live_stack.url}/demos/prefix-caching/")
    page.get_by_label("Questions, one per line").fill("When are you open?\nCan I print?")
    page.get_by_label("New tokens per answer").fill("2")
    run_and_wait(page, live_stack)
    assert out(page, "same").startswith("yes")
    # TTFT comes from the alternating repeats (medians), with the prompt tokens each setting prefilled beside it.
    assert "→" in out(page, "ttft") and "(medians of 3;" in out(page, "ttft")
    timing = comparison(page)
    assert timing["head"] == ["without the cache", "with the prefix cache"]
    prefilled = [int(x.replace(",", "")) for x in timing["prompt tokens prefilled"]]
    assert prefilled[1] < prefilled[0] and int(timing["KV blocks shared"][1]) > 0
    verdict = page.locator("[data-comparison-verdict]").inner_text()
    assert verdict.startswith(("Within noise", "“with the prefix cache” was faster", "“without the cache” was faster"))
    assert_chart_is_the_comparison(page, "Bar chart: time to first token without and with")
    page.screenshot(path=str(SCREENSHOTS / "prefix-caching-demo.png"), full_page=True)
    assert not page.errors, page.errors
