"""The step timelines of the quantization demo and the primer's attention demo, on runs recorded from their real
runners and replayed over the stand-in websocket (stand_in.py), then the same runs opened from a share link:

- quantization walks the layer's blocks: at a step the block picture (in level units: weight ÷ the block's scale)
  holds that block's histogram before, the levels its weights landed on after, its largest weight (red when an
  outlier set the scale) over the format's level grid, and the error scatter rings that block; the caption gives its scale, its max error and whether an outlier set the scale;
- attention walks the query tokens: at step i the bars over the prompt's tokens are row i of the head's weights,
  the caption names the tokens it attends to most; hovering or focusing a token (arrow keys move) shows its row;
  "Head shown" switches to another head of the same run's layer without a new run."""
from __future__ import annotations

import json

import pytest

from demos.registry import DEMOS, validate
from stand_in import SMALL_PARAMS, scrub_to, store_finished_run, timeline_state

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

DONE = "() => ['done', 'shared'].includes(document.querySelector('.ilab-demo').dataset.state)"


@pytest.fixture(scope="module")
def recorded_runs(loaded_models) -> dict[str, list[dict]]:
    """This module's two demos only, as stand_in.record_runs records them (the session fixture records all ten)."""
    return {name: json.loads(json.dumps(list(DEMOS[name].load_runner()(validate(name, SMALL_PARAMS[name]),
                                                                       models=loaded_models))))
            for name in ("quantization", "attention")}


def js_exp(x: float) -> str:
    """JavaScript's x.toExponential(2): 1.23e-2, 4.50e+0."""
    mantissa, power = f"{x:.2e}".split("e")
    return f"{mantissa}e{'-' if power.startswith('-') else '+'}{int(power[1:])}"


def js_signed(x: float) -> str:
    return f"+{x:.3f}" if x >= 0 else f"−{-x:.3f}"


def quoted(token: str) -> str:
    return f"'{token.strip() or '␣'}'"


def shared_page_url(live_server, demo: str, events: list[dict], params: dict) -> str:
    """A finished run stored as a worker would leave it; its share link."""
    return f"{live_server.url}/demos/runs/{store_finished_run(demo, events, params).share_id}/"


def finish_a_run(page, url: str) -> None:
    page.goto(url)
    page.locator(".ilab-demo .ilab-run").click()
    page.wait_for_function(DONE, timeout=30_000)


# --- quantization ----------------------------------------------------------------------------------------------

BLOCK_PICTURE = """() => {
  const [pic, err] = [...document.querySelectorAll('.ilab-demo .js-plotly-plot')];
  const stems = (t) => t.x.map((x, i) => [x, t.y[i]]).filter((_, i) => i % 3 === 1); // [x, top] of each segment
  return {before: pic.data[0].y, beforeX: pic.data[0].x, after: stems(pic.data[1]).map((s) => s[1]),
          afterX: stems(pic.data[1]).map((s) => s[0]), grid: stems(pic.data[2]).map((s) => s[0]),
          top: pic.data[3].x, topColor: pic.data[3].marker.color, topName: pic.data[3].name,
          xrange: pic.layout.xaxis.range, summary: pic.closest('figure').querySelector('figcaption').textContent,
          ring: [err.layout.shapes[0].xanchor, err.layout.shapes[0].yanchor], sample: err.data[0].x.length};
}"""


def quant_caption(blocks: dict, i: int) -> str:
    b = blocks["walk"][i]
    times = f"{b['absmax'] / blocks['weight_rms']:.1f}"
    why = (f"an outlier set the scale: w = {js_signed(b['top_value'])}, {times}× the layer's RMS" if b["outlier"]
           else f"no outlier set it: its largest weight, {js_signed(b['top_value'])}, is {times}× the layer's RMS")
    return (f"Block {i + 1} of {len(blocks['walk'])} (row {b['row']}, inputs {b['start']}–{b['end'] - 1}): "
            f"scale {js_exp(b['scale'])}, max error {js_exp(b['max_error'])}; {why}.")


def assert_block_step(page, blocks: dict, i: int) -> None:
    state = scrub_to(page, "quantization", i)
    assert state["steps"] == len(blocks["walk"]) and state["step"] == i
    assert state["caption"] == quant_caption(blocks, i)
    b = blocks["walk"][i]
    pic = page.evaluate(BLOCK_PICTURE)
    assert pic["before"] == b["hist_counts"] and len(pic["beforeX"]) == blocks["bins"]
    landed = [(v, c) for v, c in zip(blocks["levels"], b["level_counts"]) if c]  # in level units: w ÷ scale
    assert pic["after"] == [c for _, c in landed] and sum(pic["after"]) == b["end"] - b["start"]
    assert pic["afterX"] == pytest.approx([x for x, _ in landed])
    assert pic["top"] == [pytest.approx(b["top_value"] / b["scale"])]
    assert max(abs(x) for x, _ in landed) == pytest.approx(abs(b["top_value"] / b["scale"]), rel=0.2)  # on the top level
    assert (pic["topColor"] == "#d62728") == b["outlier"] and ("outlier" in pic["topName"]) == b["outlier"]
    assert pic["summary"].startswith(f"Row {b['row']}, inputs {b['start']}–{b['end'] - 1}: scale {js_exp(b['scale'])}")
    assert pic["grid"] == pytest.approx(blocks["levels"])  # the format's level grid, the same at every step
    reach = max(abs(v) for v in blocks["levels"]) * 1.1
    assert pic["xrange"] == [pytest.approx(-reach), pytest.approx(reach)]
    assert pic["ring"] == [pytest.approx(b["absmax"]), pytest.approx(b["max_error"])]
    assert pic["sample"] == len(blocks["sample_absmax"])

@pytest.mark.django_db(transaction=True)
def test_the_quantization_timeline_walks_the_blocks_live_and_from_a_share_link(live_server, stand_in, recorded_runs):
    events = recorded_runs["quantization"]
    blocks = next(e for e in events if e["type"] == "quant_blocks")
    walk = blocks["walk"]
    assert 8 <= len(walk) <= 24 and [b["absmax"] for b in walk] == sorted(b["absmax"] for b in walk)
    assert walk[-1]["outlier"] and not walk[0]["outlier"]  # the walk ends on the blocks an outlier scaled
    page = stand_in
    finish_a_run(page, f"{live_server.url}/demos/quantization/")
    assert timeline_state(page, "quantization")["step"] == len(walk) - 1  # a finished run shows its last step
    middle = len(walk) // 2
    for i in (middle, 0, len(walk) - 1):
        assert_block_step(page, blocks, i)
    # The layer histogram before and after: the dequantized weights pile up on the levels.
    hist = page.evaluate("() => document.querySelectorAll('.ilab-demo .js-plotly-plot')[2].data.map((t) => t.name)")
    assert hist[:2] == ["before", "after"]

    page.goto(shared_page_url(live_server, "quantization", events, {"max_new_tokens": 2}))
    page.wait_for_function(DONE, timeout=30_000)
    assert timeline_state(page, "quantization")["steps"] == len(walk)
    assert_block_step(page, blocks, middle)
    assert page.errors == [], page.errors


# --- attention -------------------------------------------------------------------------------------------------

BARS = """() => [...document.querySelectorAll('.ilab-demo .ilab-attn__tok')].map((b) => ({
  weight: b.dataset.weight, masked: b.dataset.masked, pressed: b.getAttribute('aria-pressed'), tab: b.tabIndex,
  height: b.querySelector('.ilab-attn__bar').style.height}))"""
HEAT_Z = "() => document.querySelector('.ilab-demo .js-plotly-plot').data[0].z"
ROW_BOX = "() => document.querySelector('.ilab-demo .js-plotly-plot').layout.shapes.map((s) => [s.y0, s.y1])"


def attention_caption(tokens: list[str], row: list[float], i: int) -> str:
    order = sorted(range(i + 1), key=lambda j: -row[j])
    a = order[0]
    if i == 0:
        return f"{quoted(tokens[0])} is the first token: it can only attend to itself ({row[0]:.2f})."
    second = f" and {quoted(tokens[order[1]])} ({row[order[1]]:.2f})" if row[order[1]] >= 0.005 else ""
    return f"{quoted(tokens[i])} attends most to {quoted(tokens[a])} ({row[a]:.2f}){second}."


def assert_row(page, tokens: list[str], row: list[float], i: int) -> None:
    state = timeline_state(page, "attention")
    assert state["step"] == i and state["caption"] == attention_caption(tokens, row, i)
    bars = page.evaluate(BARS)
    assert len(bars) == len(tokens)
    for j, bar in enumerate(bars):
        if j <= i:
            assert float(bar["weight"]) == pytest.approx(row[j], abs=1e-4) and bar["masked"] == "false"
            assert bar["height"] == f"{round(row[j] * 100)}%"
        else:
            assert bar["weight"] == "" and bar["masked"] == "true"
        assert (bar["pressed"] == "true") == (j == i) and (bar["tab"] == 0) == (j == i)  # one tab stop: the query
    assert page.evaluate(ROW_BOX) == [[i - 0.5, i + 0.5]]  # the heatmap boxes the same row


@pytest.mark.django_db(transaction=True)
def test_the_attention_timeline_walks_the_query_tokens_and_a_hovered_token_shows_its_row(live_server, stand_in,
                                                                                         recorded_runs):
    events = recorded_runs["attention"]
    ev = events[0]
    tokens, w = ev["tokens"], ev["weights"]
    n = len(tokens)
    assert n == 11 and tokens[2] == " sat"
    page = stand_in
    finish_a_run(page, f"{live_server.url}/demos/attention/")
    assert timeline_state(page, "attention")["steps"] == n
    middle = n // 2
    scrub_to(page, "attention", middle)
    assert_row(page, tokens, w[middle], middle)
    scrub_to(page, "attention", 2)
    assert timeline_state(page, "attention")["caption"].startswith("'sat' attends most to ")
    assert_row(page, tokens, w[2], 2)

    # Hover a token: its row. Keyboard: focus one, arrow keys move along the prompt.
    bar = page.locator(".ilab-demo .ilab-attn__tok")
    bar.nth(7).hover()
    page.wait_for_function("() => document.querySelector('.ilab-timeline').dataset.step === '7'")
    assert_row(page, tokens, w[7], 7)
    bar.nth(4).focus()
    page.wait_for_function("() => document.querySelector('.ilab-timeline').dataset.step === '4'")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.ilab-timeline').dataset.step === '5'")
    assert_row(page, tokens, w[5], 5)
    assert page.evaluate("() => document.activeElement.dataset.index") == "5"
    page.keyboard.press("Home")
    page.wait_for_function("() => document.querySelector('.ilab-timeline').dataset.step === '0'")
    assert_row(page, tokens, w[0], 0)

    # Another head of the same layer, from the same run: bars, caption, heatmap and the form follow.
    other = 7
    rows = [r + [0.0] * (n - len(r)) for r in ev["all_heads"][other]]
    assert ev["head"] != other
    scrub_to(page, "attention", 9)
    page.get_by_label("Head shown").select_option(str(other))
    page.wait_for_function(f"() => document.querySelector('.ilab-demo .js-plotly-plot').layout.title.text"
                           f".includes('head {other}')")
    assert_row(page, tokens, rows[9], 9)
    z = page.evaluate(HEAT_Z)
    assert [[x for x in row if x is not None] for row in z] == [r[: i + 1] for i, r in enumerate(rows)]
    assert page.locator(".ilab-demo").get_by_role("spinbutton").nth(1).input_value() == str(other)
    assert page.server.started == ["attention"]  # no new run

    page.goto(shared_page_url(live_server, "attention", events, {}))
    page.wait_for_function(DONE, timeout=30_000)
    assert timeline_state(page, "attention")["steps"] == n
    scrub_to(page, "attention", middle)
    assert_row(page, tokens, w[middle], middle)
    page.locator(".ilab-demo .ilab-attn__tok").nth(3).hover()
    page.wait_for_function("() => document.querySelector('.ilab-timeline').dataset.step === '3'")
    assert_row(page, tokens, w[3], 3)
    assert page.errors == [], page.errors
