"""A student's sampler drives a live run through the real stack: Daphne, Redis and a worker taking both queues
(`cpu`: Run tests in the sandbox; `gpu`: the run on the real engine, the student's function in a sandbox of its
own). Over a real websocket: only passed code starts a run, a greedy sampler's run is the engine's own, and code
that hangs in a live run ends that run with a clear message while the worker serves the next. In Chromium (the
site's CSP): wrong code shows its failing test, right code passes, and the live run's table shows the choices."""
from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from exercises import catalog
from exercises.live_run import CANDIDATES, LIVE_DEMO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from test_demos_scaleout import WS  # noqa: E402
from wire import Browser  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SAMPLER = catalog.get("sampler")
HANGS_LIVE = (SAMPLER.reference + "\n\n_passing = sample\n\n\ndef sample(logits, temperature, top_k, top_p, u):\n"
              f"    while len(logits) == {CANDIDATES}:\n        pass\n"
              "    return _passing(logits, temperature, top_k, top_p, u)\n")


def run_tests(browser: Browser, code: str) -> dict:
    """Run tests as the page does (POST, then poll): the final state."""
    if "csrftoken" not in browser.cookies:
        browser.request("GET", f"/exercises/{SAMPLER.id}/")
    status, _, text = browser.request("POST", f"/exercises/{SAMPLER.id}/run/", {
        "code": code, "csrfmiddlewaretoken": browser.cookies["csrftoken"]})
    assert status == 202, text
    poll = json.loads(text)["poll"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = json.loads(browser.request("GET", poll)[2])
        if state["status"] not in ("queued", "running"):
            return state
        time.sleep(0.2)
    raise AssertionError(f"no result: {state}")


async def start(ws: WS, submission: str, **params) -> list[dict]:
    """Start a live run of `submission`'s sampler; every frame until the final one (or the refusal)."""
    await ws.send({"action": "start", "demo": LIVE_DEMO, "live": True, "ref": "r1",
                   "params": {"submission": submission, "prompt": "Name three colours.", **params}})
    frames = []
    while True:
        frame = await ws.recv(timeout=120)
        frames.append(frame)
        if frame["type"] in ("done", "error"):
            return frames


@pytest.mark.django_db(transaction=True)
def test_a_passing_sampler_drives_a_run_over_the_websocket(live_stack):
    browser = Browser(live_stack.http_port, "127.0.0.1")
    failing, right, hangs = (run_tests(browser, code) for code in (SAMPLER.starter, SAMPLER.reference, HANGS_LIVE))
    assert not failing["passed"] and right["passed"] and hangs["passed"], (failing, right, hangs)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items()).encode()

    async def scenario():
        ws = await WS.connect(live_stack.http_port, cookie=cookie)
        try:
            refused = await start(ws, failing["id"])
            assert refused[-1]["code"] == "invalid_param" and "passed every test" in refused[-1]["message"]

            frames = await start(ws, right["id"], max_new_tokens=8)
            assert frames[-1]["type"] == "done", frames[-1]
            events = [f["event"] for f in frames if f["type"] == "event"]
            tokens = [e["token_id"] for e in events if e["type"] == "token"]
            choices = [e for e in events if e["type"] == "student_choice"]
            assert len(tokens) == 8 and [c["token_id"] for c in choices] == tokens
            assert all(c["same"] and c["builtin_token_id"] == c["token_id"] for c in choices)
            assert frames[-1]["summary"]["n_generated"] == 8

            t0 = time.monotonic()
            stuck = await start(ws, hangs["id"], max_new_tokens=8)
            assert stuck[-1]["type"] == "error" and stuck[-1]["code"] == "student_code_failed", stuck[-1]
            assert "did not answer within 1 s at token 1 (an endless loop?)" in stuck[-1]["message"]
            assert time.monotonic() - t0 < 30

            again = await start(ws, right["id"], max_new_tokens=4)  # the worker serves the next run
            assert again[-1]["type"] == "done" and again[-1]["summary"]["n_generated"] == 4
        finally:
            await ws.close()

    asyncio.run(scenario())


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_wrong_code_fails_right_code_passes_and_drives_a_live_run_in_the_browser(live_stack, csp_page):
    page = csp_page
    page.goto(f"{live_stack.url}/exercises/{SAMPLER.id}/")
    page.wait_for_selector("section.exercise[data-ready] .cm-editor")
    live_button = page.locator("button.exercise-live-run")
    assert live_button.is_disabled()
    page.click("button.exercise-run")  # the starter code: wrong
    page.wait_for_selector(".exercise-summary.is-fail", timeout=90_000)
    failed = page.locator(".exercise-table tbody tr", has_text="✗ Failed").first
    assert "temperature" in failed.inner_text()  # the failing test, its input and what came back
    assert live_button.is_disabled()
    page.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(SAMPLER.reference)
    page.click("button.exercise-run")
    page.wait_for_selector(".exercise-summary.is-pass", timeout=90_000)
    assert live_button.is_enabled()
    page.fill("#exercise-sampler-live-max_new_tokens", "6")
    live_button.click()
    page.wait_for_selector(".exercise-live-table tbody tr >> nth=5", timeout=120_000)
    page.wait_for_selector(".exercise-live-summary:has-text('same token 6 of 6 times')", timeout=60_000)
    rows = page.locator(".exercise-live-table tbody tr")
    assert rows.count() == 6
    first = rows.first.locator("td")
    assert first.nth(0).inner_text() == first.nth(1).inner_text()  # their choice beside the engine's: the same
    assert page.locator(".exercise-live-text").inner_text().strip()
    assert page.locator("button.exercise-live-stop").is_hidden()  # shown while a run goes on
    page.reload()  # the latest run passed: after a reload it still drives a run
    page.wait_for_selector("section.exercise[data-ready] .cm-editor")
    assert live_button.is_enabled()
    assert page.errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_passing_draft_drives_a_speculative_run_in_the_browser(live_stack, csp_page):
    page, draft = csp_page, catalog.get("draft-proposer")
    page.goto(f"{live_stack.url}/exercises/{draft.id}/")
    page.wait_for_selector("section.exercise[data-ready] .cm-editor")
    live_button = page.get_by_role("button", name="Use my draft in a live run")
    assert live_button.is_disabled()
    page.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(draft.reference)
    page.click("button.exercise-run")
    page.wait_for_selector(".exercise-summary.is-pass", timeout=90_000)
    page.fill("#exercise-draft-proposer-live-max_new_tokens", "12")
    live_button.click()
    page.wait_for_selector(".exercise-live-summary:has-text('proposals')", timeout=120_000)
    assert "the same" in page.locator(".exercise-live-summary").inner_text()
    rows = page.locator(".exercise-live-table tbody tr")
    assert rows.count() >= 1 and "yes" in rows.first.inner_text()  # prompt lookup: their guesses are the built-in's
    kept = page.locator(".exercise-live-table tbody tr td:nth-child(6)").all_inner_texts()
    assert any(" of " in cell for cell in kept), kept  # guesses the model verified, and how many it kept
    assert page.locator(".exercise-live-text").inner_text().strip()
    assert page.errors == []


AXE = Path(__file__).resolve().parents[1] / "browser" / "vendor" / "axe.min.js"  # as tests/browser/test_pages_read_well
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
AXE_RUN = """(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
  .then((r) => r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
    .map((v) => `${v.id}: ` + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')))"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_finished_live_run_has_no_serious_accessibility_violation(live_stack, browser_page):
    page = browser_page  # axe is injected as a script: this page bypasses the CSP
    page.goto(f"{live_stack.url}/exercises/{SAMPLER.id}/")
    page.wait_for_selector("section.exercise[data-ready] .cm-editor")
    page.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(SAMPLER.reference)
    page.click("button.exercise-run")
    page.wait_for_selector(".exercise-summary.is-pass", timeout=90_000)
    page.fill("#exercise-sampler-live-max_new_tokens", "3")
    page.click("button.exercise-live-run")
    page.wait_for_selector(".exercise-live-summary:has-text('same token 3 of 3 times')", timeout=120_000)
    page.add_script_tag(path=str(AXE))
    assert page.evaluate(AXE_RUN, WCAG) == []
