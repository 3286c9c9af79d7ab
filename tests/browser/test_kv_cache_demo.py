"""The KV-cache demo page in a real browser against the real stack (Daphne + Celery worker + Redis)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(300)]

SCREENSHOTS = Path(os.environ.get("DEMO_SCREENSHOT_DIR", settings.BASE_DIR / "var" / "screenshots"))


RECORDER = """() => {
  const root = document.querySelector('.ilab-demo');
  const text = root.querySelector('.ilab-kv__text');
  const kv = root.querySelector('.ilab-kv__kvchart');
  window.__samples = [];
  new MutationObserver(() => {
    window.__samples.push({tokens: text.querySelectorAll('.t').length,
                           points: kv.data && kv.data.length ? kv.data[0].x.length : 0});
  }).observe(text, {childList: true});
}"""


def run_and_wait(page, timeout=90_000):
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'running'", timeout=10_000)
    page.wait_for_function("() => ['done','error','cancelled'].includes(document.querySelector('.ilab-demo').dataset.state)",
                           timeout=timeout)
    return page.evaluate("document.querySelector('.ilab-demo').dataset.state")


@pytest.mark.django_db(transaction=True)
def test_kv_cache_demo_streams_tokens_and_charts(live_stack, browser_page):
    page = browser_page
    page.goto(f"{live_stack.url}/demos/kv-cache/")
    page.get_by_label("Max new tokens").fill("8")
    assert page.get_by_label("Use the KV cache").is_checked()
    page.evaluate(RECORDER)

    state = run_and_wait(page)
    assert state == "done", page.locator(".ilab-calc__status").inner_text() + live_stack.log(live_stack.worker)[-3000:]
    tokens = page.locator(".ilab-kv__text .t")
    assert tokens.count() == 8
    generated = "".join(tokens.all_inner_texts())
    assert generated.strip(), "generated text should be visible"
    # The chart gained points as tokens arrived, not all at once at the end: it showed at least two counts between
    # none and all 8 (its redraws may lag the text by a frame or two on a busy machine, so not one count per token,
    # and the text's last change can come before the chart's last redraw).
    samples = page.evaluate("window.__samples")
    assert len({s["points"] for s in samples if 0 < s["points"] < 8}) >= 2, samples
    kv = page.evaluate("""() => { const d = document.querySelector('.ilab-kv__kvchart').data;
        const grid = document.querySelector('.ilab-kv__grid').data;
        const empty = document.querySelector('.ilab-kv__empty').dataset;
        return {halves: grid.length, rows: grid[0].z.length, empty: Number(empty.x1) - Number(empty.x0),
                points: d[0].x.length, top: d[0].y[d[0].y.length - 1]}; }""")
    # SmolLM2-135M: 30 layers of K and of V; the last forward shown: every position that gets K/V has them.
    assert kv["halves"] == 2 and kv["rows"] == 30 and kv["points"] == 8  # one point per forward
    assert kv["empty"] == 0
    assert kv["top"] > 0
    assert page.locator('[data-metric="ttft"]').inner_text().endswith("ms")
    assert page.locator('[data-metric="perToken"]').inner_text() != "–"

    # Second run without the cache: its per-step times overlay the first run's.
    page.get_by_label("Use the KV cache").uncheck()
    assert run_and_wait(page) == "done"
    traces = page.evaluate("document.querySelector('.ilab-kv__timechart').data.map(t => [t.name, t.y.length])")
    assert [t[1] for t in traces] == [8, 8], traces
    assert "cache on" in traces[0][0] and "cache off" in traces[1][0]
    assert page.locator(".ilab-kv__text .t").count() == 8

    # Third run, same as the first, with "Replay a stored run" ticked: replayed without the worker, and labelled
    # with the stored run's date, device and engine version (runs are live unless a replay is asked for).
    page.get_by_label("Use the KV cache").check()
    page.get_by_label("Replay a stored run instead of running live").check()
    assert run_and_wait(page) == "done"
    assert page.get_by_text("replayed from a previous run").is_visible()
    assert page.get_by_test_id("run-provenance").inner_text().startswith("Replay of a run recorded 20")
    assert "".join(page.locator(".ilab-kv__text .t").all_inner_texts()) == generated

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "kv-cache-demo.png"), full_page=True)
    assert not page.errors, page.errors


@pytest.mark.django_db(transaction=True)
def test_dropped_connection_resumes_and_stop_cancels(live_stack, browser_page):
    page = browser_page
    page.goto(f"{live_stack.url}/demos/kv-cache/")
    page.get_by_label("Prompt (Ctrl+Enter runs)").fill("Counting slowly: one, two, three,")
    page.get_by_label("Max new tokens").fill("24")
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => document.querySelectorAll('.ilab-kv__text .t').length >= 3", timeout=60_000)
    page.evaluate("document.querySelector('.ilab-demo').ilabDemo.socket.dropConnection()")
    page.wait_for_function("() => ['done','error'].includes(document.querySelector('.ilab-demo').dataset.state)",
                           timeout=90_000)
    assert page.evaluate("document.querySelector('.ilab-demo').dataset.state") == "done"
    # Every token exactly once despite the reconnect: no gap, no duplicate, in the text and the chart.
    assert page.locator(".ilab-kv__text .t").count() == 24
    points = page.evaluate("document.querySelector('.ilab-kv__kvchart').data[0].x")
    assert points == sorted(set(points)) and len(points) == 24

    # Stop: the worker stops between steps and the run ends cancelled.
    page.get_by_label("Use the KV cache").uncheck()
    page.get_by_label("Max new tokens").fill("100")
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => document.querySelectorAll('.ilab-kv__text .t').length >= 2", timeout=60_000)
    page.get_by_role("button", name="Stop").click()
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'cancelled'", timeout=30_000)
    assert page.locator(".ilab-kv__text .t").count() < 100
    assert "Stopped" in page.locator(".ilab-calc__status").inner_text()
    assert not page.errors, page.errors


@pytest.mark.django_db(transaction=True)
def test_dashboard_shows_the_live_worker(live_stack, browser_page):
    page = browser_page
    page.goto(f"{live_stack.url}/demos/dashboard/")
    row = page.locator("#dash-workers tbody tr th")
    row.first.wait_for(timeout=30_000)
    assert row.count() >= 1
    page.wait_for_function("() => document.getElementById('dash-tps').data.length >= 1 && "
                           "document.getElementById('dash-tps').data[0].x.length >= 2", timeout=30_000)
    assert page.locator("#dash-queue-gpu").inner_text().isdigit()
    assert page.locator("#dash-queue-name").inner_text() == "gpu"
    # the device cell names what a step runs: device · dtype · kernel
    assert "cpu · float32 · cpu-fused-step fp32" in page.locator("#dash-workers tbody tr").first.inner_text()
    # forwards by path: the cell lists "path: count" pairs once the worker has run a step, "–" before
    paths = page.locator("#dash-workers tbody tr").first.locator("td").nth(1).inner_text()
    assert paths == "–" or paths.startswith("cpu-fused-step fp32: "), paths
    assert page.locator("#dash-conn").inner_text() == "Live."
    assert not page.errors, page.errors
    assert page.locator("#dash-processes").is_hidden()  # not under `make run`: no supervisor record


@pytest.mark.django_db(transaction=True)
def test_dashboard_lists_the_processes_make_run_restarted(live_stack, browser_page):
    """The record scripts/run_stack.py publishes (demos.runstate.supervisor_key) becomes the Processes table."""
    import json
    import time

    import redis

    record = {"updated": time.time(), "processes": [
        {"name": "redis", "state": "running", "pid": 11, "restarts": 0, "last_restart": None, "last_exit": None},
        {"name": "gpu", "state": "running", "pid": 12, "restarts": 2, "last_restart": time.time(), "last_exit": -9},
        {"name": "cpu", "state": "given_up", "pid": 13, "restarts": 5, "last_restart": time.time(), "last_exit": 1}]}
    client = redis.Redis.from_url(live_stack.redis_url)
    client.set("demos:supervisor", json.dumps(record), ex=60)
    try:
        page = browser_page
        page.goto(f"{live_stack.url}/demos/dashboard/")
        rows = page.locator("#dash-processes-table tbody tr")
        rows.first.wait_for(timeout=30_000)
        text = [rows.nth(i).inner_text() for i in range(rows.count())]
        assert "2" in text[1].split("\t") and "-9" in text[1] and "given up" in text[2], text
        assert "12" not in text[1].split("\t")  # no pid for an anonymous visitor
        assert not page.errors, page.errors
    finally:
        client.delete("demos:supervisor")


HOSTILE = """async () => {
  const open = () => new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${location.host}/ws/demos/`);
    ws.onopen = () => resolve(ws);
    ws.onerror = reject;
  });
  const ws = await open();
  const replies = [];
  ws.onmessage = (e) => replies.push(JSON.parse(e.data));
  const msgs = ['{bad', new Uint8Array([0, 1, 2, 255]), 'x'.repeat(20000),
    JSON.stringify({action: 'start', demo: 'kv-cache', params: {max_new_tokens: 'x'}}),
    JSON.stringify([1]), JSON.stringify({action: 'ping'})];
  for (const m of msgs) ws.send(m);
  await new Promise((r) => setTimeout(r, 3000));
  const before = replies.length;
  ws.send('y'.repeat(3_000_000));  // far over the limit: an error frame or a closed socket, never a crash
  const closed = await new Promise((r) => { ws.onclose = () => r(true); setTimeout(() => r(false), 5000); });
  const ws2 = await open();
  const pong = await new Promise((r) => { ws2.onmessage = (e) => r(JSON.parse(e.data)); ws2.send('{"action":"ping"}'); });
  ws2.close();
  return {replies, before, closed, pong};
}"""


@pytest.mark.django_db(transaction=True)
def test_real_server_answers_hostile_frames_and_stays_up(live_stack, browser_page):
    page = browser_page
    page.goto(f"{live_stack.url}/demos/")
    result = page.evaluate(HOSTILE)
    codes = [r.get("code", r["type"]) for r in result["replies"][: result["before"]]]
    assert codes == ["invalid_json", "binary_not_supported", "message_too_large", "invalid_param",
                     "invalid_message", "pong"], result
    after = result["replies"][result["before"]:]
    assert result["closed"] or [r["code"] for r in after] == ["message_too_large"], result
    assert result["pong"]["type"] == "pong"
    assert page.goto(f"{live_stack.url}/demos/kv-cache/").status == 200
    assert live_stack.procs["daphne"].poll() is None


@pytest.mark.django_db(transaction=True)
def test_kv_cache_lesson_page_runs_its_embedded_demo(live_stack, browser_page):
    """The lesson itself (not the standalone demo page): its embedded demo runs on the worker and the
    tokens and the layers × positions KV grid appear inside the lesson."""
    from django.core.management import call_command

    call_command("loadcourse", verbosity=0)
    page = browser_page
    page.goto(f"{live_stack.url}/modules/kv-cache/")
    demo = page.locator(".ilab-demo").first
    demo.scroll_into_view_if_needed()
    demo.get_by_label("Max new tokens").fill("6")
    demo.get_by_role("button", name="Run").click()
    page.wait_for_function("() => ['done','error','cancelled'].includes(document.querySelector('.ilab-demo').dataset.state)",
                           timeout=90_000)
    assert demo.get_attribute("data-state") == "done", demo.locator(".ilab-calc__status").inner_text()
    assert demo.locator(".ilab-kv__text .t").count() == 6
    assert page.evaluate("document.querySelector('.ilab-demo .ilab-kv__grid').data[0].z.length") == 30  # layers
    assert not page.errors, page.errors
