"""Issue 15 in a real browser against the real stack: runs are live and say what measured them, the student's
runs overlay on one chart whose legend names the changed parameter, and a share link redraws a finished run
read-only (no model runs)."""
from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(400)]

FINAL = "() => ['done','error','cancelled'].includes(document.querySelector('.ilab-demo').dataset.state)"
COMPARE = "() => { const c = document.querySelector('[data-testid=compare-chart]'); " \
          "return c && c.data ? c.data.map(t => [t.name, t.y.length]) : []; }"


def wait_shared(page, status=".ilab-calc__status"):
    try:
        page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'shared'", timeout=30_000)
    except Exception:
        raise AssertionError(f"{page.locator(status).first.inner_text()!r} {page.errors}") from None


def run_and_wait(page, stack, status=".ilab-calc__status"):
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'running'", timeout=10_000)
    page.wait_for_function(FINAL, timeout=120_000)
    state = page.evaluate("document.querySelector('.ilab-demo').dataset.state")
    assert state == "done", page.locator(status).first.inner_text() + stack.log(stack.worker)[-3000:]


@pytest.mark.django_db(transaction=True)
def test_two_runs_overlay_with_a_legend_naming_the_change_and_a_share_link_redraws_one(live_stack, browser_page):
    page = browser_page
    page.goto(f"{live_stack.url}/demos/kv-cache/")
    page.get_by_label("Prompt (Ctrl+Enter runs)").fill("Two plus two is")
    page.get_by_label("Max new tokens").fill("4")
    run_and_wait(page, live_stack)
    provenance = page.get_by_test_id("run-provenance").inner_text()
    assert re.match(r"Live run on cpu · float\d+, engine version [0-9a-f]{16}", provenance), provenance
    share_url = page.get_by_test_id("share-link").get_attribute("href")
    assert re.search(r"/demos/runs/[A-Za-z0-9_-]{16}/$", share_url), share_url
    generated = "".join(page.locator(".ilab-kv__text .t").all_inner_texts())

    page.get_by_label("Use the KV cache").uncheck()
    run_and_wait(page, live_stack)
    traces = page.evaluate(COMPARE)
    # Same axes, one trace per run, each named by the parameter that changed between them.
    assert traces == [["Use the KV cache: on", 4], ["Use the KV cache: off", 4]], traces
    # The cache's size, not the time per step: the demo's own chart already overlays each run's time.
    assert page.evaluate("document.querySelector('[data-testid=compare-chart]').layout.title.text") == "KV cache size"
    assert page.get_by_label("Compare on").count() == 0
    assert page.locator(".js-plotly-plot .gtitle", has_text="Time per").count() == 1

    # The comparison outlives a reload (sessionStorage), and "Clear comparison" empties it.
    page.reload()
    page.wait_for_function("() => (document.querySelector('[data-testid=compare-chart]').data || []).length === 2",
                           timeout=30_000)
    page.get_by_role("button", name="Clear comparison").click()
    assert page.get_by_test_id("compare-chart").is_hidden()
    assert page.evaluate("sessionStorage.getItem('ilab-compare:kv-cache')") == "[]"

    # The share link: the first run redrawn from its stored trace, read-only, labelled with what measured it.
    page.goto(share_url)
    wait_shared(page)
    assert "".join(page.locator(".ilab-kv__text .t").all_inner_texts()) == generated
    assert page.evaluate("document.querySelector('.ilab-kv__grid').data[0].z.length") == 30  # layers
    assert page.get_by_role("button", name="Run", exact=True).is_disabled()
    assert page.get_by_test_id("run-provenance").inner_text().startswith("Shared run (read-only, nothing runs): measured 20")
    assert "cpu" in page.get_by_test_id("shared-run-note").inner_text()
    # Opened from a share link, the run can join this student's comparison.
    page.get_by_role("button", name="Add to the comparison").click()
    assert len(page.evaluate(COMPARE)) == 1

    # A lesson-style link (?run=<id>) draws the same run in the page's embed, which stays usable.
    share_id = share_url.rstrip("/").rsplit("/", 1)[1]
    page.goto(f"{live_stack.url}/demos/kv-cache/?run={share_id}")
    wait_shared(page)
    assert page.locator(".ilab-kv__text .t").count() == 4
    assert page.get_by_role("button", name="Run", exact=True).is_enabled()
    assert page.goto(f"{live_stack.url}/demos/runs/not-a-real-share-id/").status == 404
    assert not [e for e in page.errors if "404" not in e], page.errors


@pytest.mark.django_db(transaction=True)
def test_the_shared_helper_compares_and_shares_a_kit_demo(live_stack, browser_page):
    """prefill-decode (course-demo-kit.js): the same comparison, header and share link with no code of its own."""
    page = browser_page
    page.goto(f"{live_stack.url}/demos/prefill-decode/")
    try:
        page.get_by_label("Repeat the prompt").fill("1", timeout=60_000)
    except Exception:
        raise AssertionError(page.content()[-3000:] + str(page.errors)) from None
    page.get_by_label("New tokens").fill("2")
    run_and_wait(page, live_stack, ".ilab-calc__status")
    page.get_by_label("New tokens").fill("3")
    run_and_wait(page, live_stack, ".ilab-calc__status")
    assert page.evaluate(COMPARE) == [["New tokens: 2", 2], ["New tokens: 3", 3]]
    assert page.get_by_test_id("run-provenance").inner_text().startswith("Live run on cpu")
    share_url = page.get_by_test_id("share-link").get_attribute("href")
    page.goto(share_url)
    wait_shared(page, ".ilab-calc__status")
    steps = page.evaluate("document.querySelectorAll('.ilab-calc__chart')[0].data[0].x.length")
    assert steps == 3  # the second run's three forward passes, from storage
    assert page.get_by_role("button", name="Run", exact=True).is_disabled()
    assert not page.errors, page.errors
