"""Every demo page against the real stack (Daphne + Celery worker + Redis): Stop mid-run ends the run without
a page error, and a page reload mid-run picks the run up again (run id kept in sessionStorage)."""
from __future__ import annotations

import pytest

from demos.registry import DEMOS
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]

STATE = "document.querySelector('.ilab-demo').dataset.state"
FINISHED = f"() => ['done','error','cancelled'].includes({STATE})"


def status_text(page) -> str:
    return page.locator(".ilab-demo [role=status]").first.inner_text()


@pytest.mark.xfail(strict=False, reason="fails in the full suite since the registry grew to 18 demos (one page, one "
                   "worker, every demo in turn); each demo's Stop passes alone: to be split per demo")
@pytest.mark.django_db(transaction=True)
def test_stop_works_on_every_demo(live_stack, demo_page):
    page = demo_page
    states = {}
    for name in DEMOS:
        page.goto(f"{live_stack.url}/demos/{name}/")
        page.get_by_role("button", name="Run", exact=True).click()
        # The run may wait its turn while the worker winds down the run stopped just before (a long demo stops
        # between its measurements), so allow the queue its time.
        page.wait_for_function("() => Boolean(document.querySelector('.ilab-demo').dataset.runId)", timeout=120_000)
        stop = page.get_by_role("button", name="Stop", exact=True)
        try:
            stop.click(timeout=3_000)
        except PlaywrightTimeout:  # disabled: the run already finished (a very short run)
            pass
        page.wait_for_function(FINISHED, timeout=120_000)
        state = states[name] = page.evaluate(STATE)
        assert state in ("cancelled", "done"), (name, state, status_text(page),
                                                 live_stack.log(live_stack.worker)[-2000:])
        if state == "cancelled":
            assert "Stopped" in status_text(page), (name, status_text(page))
        assert page.get_by_role("button", name="Run", exact=True).is_enabled()
        assert not page.errors, (name, page.errors)
    print("states after Stop:", states)
    assert sum(state == "cancelled" for state in states.values()) >= len(DEMOS) // 2, states  # really stopped


@pytest.mark.django_db(transaction=True)
def test_reload_mid_run_resumes_the_run(live_stack, demo_page):
    page = demo_page
    from demos.models import Run

    page.goto(f"{live_stack.url}/demos/kv-cache/")
    assert "sessionid" not in {c["name"] for c in page.context.cookies()}  # looking made no session
    page.get_by_label("Preset").select_option("")
    page.get_by_label("Prompt (Ctrl+Enter runs)").fill("A reload in the middle of a run: the story goes on and on")
    page.get_by_label("Max new tokens").fill("48")
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('.ilab-kv__text .t').length >= 2", timeout=120_000)
    run_id = page.evaluate("document.querySelector('.ilab-demo').dataset.runId")
    # The first run made the session, and its socket (reconnected to carry it) owns the run: a reload resumes it.
    assert "sessionid" in {c["name"] for c in page.context.cookies()}
    assert Run.objects.get(pk=run_id).owner.startswith("s:")
    page.reload()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo').dataset.runId === '{run_id}'", timeout=30_000)
    page.wait_for_function(FINISHED, timeout=180_000)
    assert page.evaluate(STATE) == "done", status_text(page)
    assert page.locator(".ilab-kv__text .t").count() >= 2  # the tokens from before the reload came back too
    assert page.get_by_label("Prompt (Ctrl+Enter runs)").input_value().startswith("A reload in the middle")
    assert page.evaluate("Object.keys(sessionStorage).filter((k) => k.startsWith('ilab-run:'))") == []
    page.reload()  # finished: nothing to resume
    page.wait_for_timeout(500)
    assert page.evaluate(STATE) == "idle"
    # A remembered run the server does not know (or not for this visitor): a calm note, not an error.
    key = page.evaluate("`ilab-run:${location.pathname}#kv-cache#0`")
    page.evaluate(f"sessionStorage.setItem('{key}', JSON.stringify({{runId: '00000000-0000-4000-8000-000000000000'}}))")
    page.reload()
    page.get_by_text("The run from before the reload is no longer available").wait_for(timeout=30_000)
    assert page.evaluate(STATE) == "idle"
    assert not page.errors, page.errors


# Eight sequences per step, 33 steps per mode: seconds on the course CPU, so the second mode is still running when
# the first mode's row appears (few, heavy steps: the page redraws its charts once per step and keeps up).
LONG_WORKLOAD = ", ".join(["32@0"] * 8)


@pytest.mark.django_db(transaction=True)
def test_reload_mid_run_resumes_a_course_demo(live_stack, demo_page):
    """The shared demo shell (every demo): a reload between the two modes of a batching run picks
    the run up again and draws both modes' results, the first one redrawn from the stored events, with the form
    showing the run's own settings."""
    page = demo_page
    page.goto(f"{live_stack.url}/demos/batching/")
    page.get_by_label("Requests: new tokens @ arrival step").fill(LONG_WORKLOAD)
    page.get_by_label("Batch size (sequence slots)").fill("8")
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('.ilab-demo table:not(.ilab-compare-timing) tbody tr').length >= 1", timeout=180_000)
    run_id = page.evaluate("document.querySelector('.ilab-demo').dataset.runId")
    assert page.evaluate(STATE) == "running", (status_text(page), page.locator(".ilab-provenance").inner_text(), page.locator(".ilab-demo table").inner_text())  # mid-run
    page.reload()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo').dataset.runId === '{run_id}'", timeout=30_000)
    page.wait_for_function(FINISHED, timeout=240_000)
    assert page.evaluate(STATE) == "done", status_text(page)
    rows = page.locator(".ilab-demo table:not(.ilab-compare-timing) tbody tr th").all_inner_texts()
    assert rows == ["continuous", "static"], rows  # the mode from before the reload came back too
    assert page.get_by_label("Requests: new tokens @ arrival step").input_value() == LONG_WORKLOAD
    assert page.get_by_label("Batch size (sequence slots)").input_value() == "8"
    assert page.evaluate("Object.keys(sessionStorage).filter((k) => k.startsWith('ilab-run:'))") == []
    assert not page.errors, page.errors


@pytest.mark.django_db(transaction=True)
def test_stop_mid_stream_keeps_what_was_streamed(live_stack, demo_page):
    """Stop after part of a run has streamed: the partial results stay on the page with a "Stopped" note (a mode cut
    short is labelled so), no page error, and no "What to try next" (that follows a finished run)."""
    page = demo_page
    page.goto(f"{live_stack.url}/demos/batching/")
    page.get_by_label("Requests: new tokens @ arrival step").fill(LONG_WORKLOAD)
    page.get_by_label("Batch size (sequence slots)").fill("2")  # 128 steps per mode
    page.get_by_role("button", name="Run", exact=True).click()
    # Stop once the second mode has streamed a few steps: its Gantt panel is drawing.
    page.wait_for_function("() => { const d = document.querySelectorAll('.ilab-calc__chart')[0].data || [];"
                           " return d.length === 2 && d[1].x.length >= 3; }", timeout=180_000)
    page.get_by_role("button", name="Stop", exact=True).click()
    page.wait_for_function(FINISHED, timeout=60_000)
    assert page.evaluate(STATE) == "cancelled", status_text(page)
    assert "Stopped" in status_text(page)
    rows = page.locator(".ilab-demo table:not(.ilab-compare-timing) tbody tr th").all_inner_texts()
    assert rows in (["continuous"], ["continuous", "static (stopped)"]), rows  # what streamed stays, the cut mode says so
    assert not page.locator(".ilab-why").is_visible()  # no explanation built on a half-run mode
    assert page.evaluate("document.querySelectorAll('.ilab-calc__chart')[0].data[1].x.length") >= 3  # static's steps too
    assert not page.get_by_role("complementary", name="What to try next").is_visible()
    assert not page.errors, page.errors
