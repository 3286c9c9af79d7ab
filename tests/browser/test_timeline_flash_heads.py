"""The FlashAttention demo's tile walk per head: the student picks the head whose walk the timeline shows (every
head of the layer travels in the trace when the run is small enough; otherwise the run's `head` setting chooses),
scrubs it, and the picture shows that head's running max, sum and accumulator, the same on a share link. Also the
frame-rate measurement of scrubbing the largest run (MEASURE_TIMELINE_FPS=1; printed, never asserted)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from stand_in import SMALL_PARAMS, scrub_to, stand_in_page, store_finished_run, timeline_state

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(900)]

DEMO = "flash-attention"
ROOT = f'[data-demo="{DEMO}"]'

# About 500 tokens (the spec's prompt limit is 512): the largest walk the spec allows, in its heaviest tiles (128
# rows a frame, 10 steps) and in its longest (8-row tiles, the walk's whole budget of steps).
LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 50
LARGEST = {"heaviest": {"prompt": LONG_PROMPT, "block_size": 128}, "longest": {"prompt": LONG_PROMPT, "block_size": 8}}


def record(params: dict) -> list[dict]:
    """The run's events up to the tile walk (the timed repeats after it add no steps)."""
    from demos.registry import DEMOS, validate
    from workers.serving import LoadedModels

    events = []
    for ev in DEMOS[DEMO].load_runner()(validate(DEMO, params), models=LoadedModels()):
        events.append(ev)
        if ev["type"] == "flash_tile_walk":
            break
    return json.loads(json.dumps(events))


def open_finished(page, base: str) -> None:
    page.goto(f"{base}/demos/{DEMO}/")
    page.locator(f"{ROOT} .ilab-run").click()
    page.wait_for_function(f"() => document.querySelector('{ROOT}').dataset.state === 'done'", timeout=60_000)


def open_shared(page, base: str, events: list[dict], params: dict) -> None:
    run = store_finished_run(DEMO, events, params)
    page.goto(f"{base}/demos/runs/{run.share_id}/")
    page.wait_for_function(f"() => document.querySelector('{ROOT}').dataset.state === 'shared'", timeout=30_000)


# What the step picture shows once the scrubber rests on a step: the lit tile on the grid; the step profiles of m
# and l as drawn (shapes: per row, the value its band reaches) with the rows that rescaled (the orange bands); the
# accumulator's image (where and how big); the hover traces' exact values; the text, title and head choice.
TILE_SHOWN = r"""(root) => {
  const demo = document.querySelector(root);
  const charts = [...demo.querySelectorAll('.ilab-calc__chart')];
  const grid = charts.find((c) => c.getAttribute('aria-label').startsWith('Grid:'));
  const stats = charts.find((c) => c.getAttribute('aria-label').startsWith('Profiles and heatmap'));
  const lit = grid.layout.shapes[1];
  const bands = (path) => [...path.matchAll(/H(-?[\d.e-]+)V(-?[\d.e-]+)/g)].map(([, x, y]) => [Number(y) - 0.5, Number(x)]);
  const shapes = stats.layout.shapes;
  const profile = (xref, color) => shapes.filter((s) => s.xref === xref && s.line.width > 0).flatMap((s) => bands(s.path));
  const orange = (xref) => shapes.filter((s) => s.xref === xref && s.line.width === 0).flatMap((s) => bands(s.path));
  const image = stats.layout.images[0];
  const pick = demo.querySelector('select.ilab-flash__head');
  return {lit: [Math.round(lit.y0 + 0.5), Math.round(lit.x0 + 0.5)],
          m: profile('x'), l: profile('x2'), roseM: orange('x').map(([r]) => r), roseL: orange('x2').map(([r]) => r),
          image: [image.y + 0.5, image.sizey, image.sizex, image.source.slice(0, 22)],
          exact: stats.dataset.exact, hoverM: stats.data[0].x, hoverL: stats.data[1].x, hoverAcc: stats.data[2].z,
          hoverRows: stats.data[0].y, title: stats.layout.title.text, text: demo.querySelector('.ilab-flash__lit').textContent,
          heads: [...pick.options].map((o) => Number(o.value)), head: Number(pick.value), headDisabled: pick.disabled};
}"""


def tile_shown(page) -> dict:
    """The picture of the shown step, once its exact hover values have followed (the scrubber rested)."""
    page.wait_for_function("""(root) => {
      const demo = document.querySelector(root);
      const step = demo.querySelector('.ilab-timeline').dataset.step;
      const stats = [...demo.querySelectorAll('.ilab-calc__chart')].find((c) => c.getAttribute('aria-label').startsWith('Profiles'));
      return stats.dataset.exact && demo.querySelector('.ilab-flash__lit').textContent && step !== undefined;
    }""", arg=ROOT)
    return page.evaluate(TILE_SHOWN, ROOT)


def head_tiles(walk: dict, head: int) -> list[dict]:
    """Head `head`'s walk in the event (the run's own head: `tiles`)."""
    return walk["tiles"] if head == walk["head"] else next(h["tiles"] for h in walk["heads"] if h["head"] == head)


def assert_tile(page, walk: dict, head: int, index: int) -> None:
    """The picture and caption at step `index` are head `head`'s tile `index`, exactly."""
    tile = head_tiles(walk, head)[index]
    page.wait_for_function("([root, want]) => [...document.querySelectorAll(`${root} .ilab-calc__chart`)]"
                           ".some((c) => c.dataset.exact === want)", arg=[ROOT, f"{head}:{tile['q_block']}:{tile['k_block']}"])
    shown = tile_shown(page)
    start = tile["q_block"] * walk["block_q"]
    rows = list(range(start, start + len(tile["m"])))
    assert shown["lit"] == [tile["q_block"], tile["k_block"]]
    assert shown["m"] == [[r, x] for r, x in zip(rows, tile["m"])] and shown["l"] == [[r, x] for r, x in zip(rows, tile["l"])]
    rose = [r for r, f in zip(rows, tile["rescale"]) if 0 < f < 1]
    assert shown["roseM"] == shown["roseL"] == rose  # the rows whose max rose at this tile, in orange
    assert shown["image"] == [start, len(tile["m"]), walk["acc_dims"], "data:image/png;base64,"]
    assert shown["hoverM"] == tile["m"] and shown["hoverL"] == tile["l"] and shown["hoverAcc"] == tile["acc"]
    assert shown["hoverRows"] == rows
    assert shown["text"] == f"Query tile {tile['q_block']} after key tile {tile['k_block']} (head {head})"
    assert shown["title"].startswith(f"Query tile {tile['q_block']} of head {head}")
    assert shown["head"] == head
    caption = timeline_state(page, DEMO)["caption"]
    assert caption.startswith(f"Query tile {tile['q_block']} × key tile {tile['k_block']} "), caption
    if tile["k_block"] > 0:
        assert (f"the running max rose in {len(rose)} of {len(rows)} rows" in caption) if rose else "no row's max rose" in caption


def switch_head(page, head: int) -> None:
    page.select_option(f"{ROOT} select.ilab-flash__head", str(head))


def middle_rescaling_step(tiles: list[dict]) -> int:
    """A middle tile where some rows rescaled (the telling picture), where there is one."""
    mid = len(tiles) // 2
    rescaled = [i for i, t in enumerate(tiles) if t["k_block"] > 0 and any(0 < r < 1 for r in t["rescale"])]
    return min(rescaled, key=lambda j: abs(j - mid)) if rescaled else mid


def check_heads(page, walk: dict) -> None:
    """The run's head first; scrub; switch heads at that step (the timeline stays on it) and back."""
    assert walk["heads"] and [h["head"] for h in walk["heads"]] == list(range(walk["n_heads"]))
    n = len(walk["tiles"])
    assert timeline_state(page, DEMO)["steps"] == n
    shown = tile_shown(page)
    assert shown["heads"] == list(range(walk["n_heads"])) and shown["head"] == walk["head"] and not shown["headDisabled"]
    assert_tile(page, walk, walk["head"], n - 1)  # a finished run shows its last tile
    other = 4 if walk["head"] != 4 else 3
    i = middle_rescaling_step(head_tiles(walk, other))
    scrub_to(page, DEMO, i)
    assert_tile(page, walk, walk["head"], i)
    switch_head(page, other)
    page.wait_for_function("([root, i]) => document.querySelector(`${root} .ilab-timeline`).dataset.step === String(i)",
                           arg=[ROOT, i])
    assert_tile(page, walk, other, i)
    assert timeline_state(page, DEMO)["steps"] == n
    scrub_to(page, DEMO, 0)
    assert_tile(page, walk, other, 0)
    scrub_to(page, DEMO, i + 1)  # a next step within or past the query tile: drawn from the chosen head too
    assert_tile(page, walk, other, i + 1)
    switch_head(page, walk["head"])
    assert_tile(page, walk, walk["head"], i + 1)


@pytest.mark.django_db(transaction=True)
def test_the_student_switches_heads_and_scrubs_each_heads_walk_live_and_on_a_share_link(live_server, stand_in,
                                                                                       recorded_runs):
    events = recorded_runs[DEMO]
    walk = next(e for e in events if e["type"] == "flash_tile_walk")
    open_finished(stand_in, live_server.url)
    check_heads(stand_in, walk)
    open_shared(stand_in, live_server.url, events, SMALL_PARAMS[DEMO])
    check_heads(stand_in, walk)
    assert stand_in.errors == []


@pytest.mark.django_db(transaction=True)
def test_a_long_run_walks_the_head_its_settings_chose_and_says_how_to_see_another(live_server, chromium):
    """A prompt too long for every head's walk: the trace carries head 6 only (the run's `head`), the choice shows
    that one head, disabled, and the note names the setting and its range from the spec."""
    events = record({"prompt": LONG_PROMPT, "block_size": 128, "head": 6})
    walk = next(e for e in events if e["type"] == "flash_tile_walk")
    assert walk["heads"] == [{"head": 6}]
    context, page, _ = stand_in_page(chromium, {DEMO: events}, viewport={"width": 1280, "height": 900})
    open_finished(page, live_server.url)
    shown = tile_shown(page)
    assert shown["heads"] == [6] and shown["head"] == 6 and shown["headDisabled"]
    note = page.locator(f"{ROOT} .ilab-flash__head + .ilab-calc__summary").text_content()
    assert "set Head in the settings, 0–8, and run again" in note, note
    scrub_to(page, DEMO, 4)
    assert_tile(page, walk, 6, 4)
    # The form asks for the head within the spec's range: a head past it is refused before any run starts.
    field = page.locator(ROOT).get_by_role("spinbutton", name="Head")
    assert [field.get_attribute("min"), field.get_attribute("max")] == ["0", "8"]
    field.fill("9")
    page.locator(f"{ROOT} .ilab-run").click()
    assert field.evaluate("(f) => f.validity.rangeOverflow")
    assert page.locator(ROOT).get_attribute("data-state") == "done"  # the shown run stays
    assert page.errors == [], page.errors
    context.close()


# Move the scrubber one step per animation frame for `ms` milliseconds (round and round a short walk), as a drag
# does; frames per second over the drag, the median and 90th-percentile frame, and moves whose step was not drawn
# in their frame.
SCRUB = """async ([root, ms]) => {
  const range = document.querySelector(`${root} .ilab-timeline input[type=range]`);
  const timeline = range.closest('.ilab-timeline');
  const frame = () => new Promise(requestAnimationFrame);
  const n = Number(range.max) + 1;
  await frame();
  const times = [];
  let missed = 0;
  const start = performance.now();
  let t = start;
  for (let i = 1; performance.now() - start < ms; i += 1) {
    const step = i % n;
    range.value = String(step);
    range.dispatchEvent(new Event('input', {bubbles: true}));
    await frame();
    if (timeline.dataset.step !== String(step)) missed += 1;
    const now = performance.now();
    times.push(now - t);
    t = now;
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {steps: n, frames: times.length, fps: times.length / ((performance.now() - start) / 1000),
          median_ms: sorted[times.length >> 1], p90_ms: sorted[Math.floor(times.length * 0.9)], missed};
}"""


def serve_scripts_of(page, commit: str) -> None:
    """Serve the demo's two scripts as they were at `commit` (the 'before' of a before/after measurement)."""
    for name in ("flash-attention.js", "flash-steps.js"):
        body = subprocess.run(["git", "show", f"{commit}:static/js/demos/{name}"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).resolve().parents[2]).stdout
        page.route(f"**/js/demos/{name}*", serve(body))


def serve(body: str):
    return lambda route: route.fulfill(body=body, content_type="text/javascript", headers={"Cache-Control": "no-store"})


@pytest.mark.skipif(not os.environ.get("MEASURE_TIMELINE_FPS"), reason="a measurement: MEASURE_TIMELINE_FPS=1 runs it")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("size", list(LARGEST))
def test_scrubbing_the_largest_walk_frame_rate(live_server, chromium, size):
    """Frames per second while dragging through the largest walk, printed (run with -s): with FLASH_FPS_BEFORE set
    to a commit, that commit's scripts are measured too, interleaved with today's on the same box, with the load
    average beside each figure. Timings are not asserted: a loaded box says nothing about the page."""
    events = record(LARGEST[size])
    before = os.environ.get("FLASH_FPS_BEFORE")
    variants = {"after": None, **({"before": before} if before else {})}
    pages = {}
    for name, commit in variants.items():
        context, page, _ = stand_in_page(chromium, {DEMO: events}, viewport={"width": 1280, "height": 900})
        if commit:
            serve_scripts_of(page, commit)
        open_finished(page, live_server.url)
        pages[name] = (context, page)
    found = {name: [] for name in variants}
    for _ in range(3):
        for name, (_, page) in pages.items():
            load = os.getloadavg()[0]
            result = page.evaluate(SCRUB, [ROOT, 3000])
            found[name].append({"fps": round(result["fps"], 1), "median_ms": round(result["median_ms"], 1),
                                "p90_ms": round(result["p90_ms"], 1), "missed": result["missed"], "load": load})
    for name, rows in found.items():
        fps = sorted(r["fps"] for r in rows)
        print(f"\n{size} ({timeline_state(pages[name][1], DEMO)['steps']} steps) {name}: median {fps[1]} frames/s; {rows}")
    for context, page in pages.values():
        assert page.errors == [], page.errors
        context.close()


@pytest.mark.django_db(transaction=True)
def test_a_run_shared_before_heads_were_carried_draws_its_one_head(live_server, stand_in, recorded_runs):
    """A trace stored before `heads` and `n_heads` existed: its share link walks `head` with `tiles`, as before."""
    events = [{k: v for k, v in e.items() if k not in ("heads", "n_heads")} if e["type"] == "flash_tile_walk" else e
              for e in recorded_runs[DEMO]]
    walk = next(e for e in events if e["type"] == "flash_tile_walk")
    open_shared(stand_in, live_server.url, events, SMALL_PARAMS[DEMO])
    shown = tile_shown(stand_in)
    assert shown["heads"] == [walk["head"]] and shown["headDisabled"]
    i = middle_rescaling_step(walk["tiles"])
    scrub_to(stand_in, DEMO, i)
    assert_tile(stand_in, walk, walk["head"], i)
    assert stand_in.errors == []
