"""Every demo's caption, metric cards and plotted data tell the same story at the first, a middle and the last step
(issue 39): a student reads the caption under a picture and the cards beside it, so the counts they name (running,
waiting and finished requests, blocks in use, accepted guesses, bytes, tokens, FLOP per byte) must be the ones the
chart draws. The page replays each demo's recorded run (stand_in.py: the real runners' events, no worker); at each
visited step this reads the timeline's caption, the cards (`dd[data-out]`, `dd[data-metric]`) and every chart's
Plotly `gd.data`/`gd.layout` and checks them against each other, not against the page's own step objects. One
page serves every demo of the registry (one without its own check yet gets the generic one, check_any)."""
from __future__ import annotations

import math
import re

import pytest

from stand_in import scrub_to, stand_in_page, timeline_state

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

# The page's state at the shown step: the caption, the cards, each chart by its aria-label, and the queue lanes.
READ = """(demo) => {
  const root = document.querySelector(`.ilab-demo[data-demo="${demo}"]`);
  const tl = root.querySelector('.ilab-timeline');
  const cards = {};
  root.querySelectorAll('dd[data-out], dd[data-metric]').forEach((d) => { cards[d.dataset.out || d.dataset.metric] = d.textContent; });
  const charts = {};
  root.querySelectorAll('.js-plotly-plot').forEach((gd) => {
    const label = gd.getAttribute('aria-label') || '';
    charts[label] = {title: gd.layout?.title?.text || '', shapes: gd.layout?.shapes || [], exact: gd.dataset.exact,
      data: (gd.data || []).map((t) => ({name: t.name, x: t.x, y: t.y, z: t.z, text: t.text, customdata: t.customdata}))};
  });
  const lanes = Object.fromEntries([...root.querySelectorAll('.ilab-queues__lane')].map((l) => [l.dataset.lane,
    {head: l.querySelector('h4').textContent, chips: [...l.querySelectorAll('.ilab-chip')].map((c) => ({
      id: c.dataset.request, held: c.hasAttribute('data-held'), finishes: c.hasAttribute('data-finishes')}))}]));
  return {step: Number(tl.dataset.step), steps: Number(tl.dataset.steps),
          caption: tl.querySelector('.ilab-timeline__caption').textContent, cards, charts, lanes};
}"""


SI = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def agrees(shown: str, value: float) -> bool:
    """`shown` (a number as the page prints it: '8.0', '0.50', '4.01e-2') is `value` rounded to its digits."""
    mantissa, _, exponent = shown.partition("e")
    decimals = len(mantissa.partition(".")[2])
    step = 10.0 ** (-decimals + (int(exponent) if exponent else 0))
    return abs(float(shown) - value) <= step / 2 + 1e-12 * abs(value)


def number(pattern: str, text: str) -> list[str]:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return list(found.groups())


def chart(state: dict, label: str) -> dict:
    found = [c for name, c in state["charts"].items() if name.startswith(label)]
    assert len(found) == 1, (label, list(state["charts"]))
    return found[0]


def trace(c: dict, name: str) -> dict:
    found = [t for t in c["data"] if t["name"] == name]
    assert len(found) == 1, (name, [t["name"] for t in c["data"]])
    return found[0]


# --- one check per demo: state → assertions -------------------------------------------------------------------

def check_attention(page, s, events):
    i = s["step"]
    heat = chart(s, "Heatmap of attention weights")
    row = heat["data"][0]["z"][i]
    box = heat["shapes"][0]
    assert box["y0"] + 0.5 == i, (box, i)  # the heatmap's boxed row is the caption's query
    bars = page.eval_on_selector_all('[data-demo="attention"] .ilab-attn__bar-row button',
                                     "(bs) => bs.map((b) => b.dataset.weight)")
    assert [float(w) for w in bars[:i + 1]] == pytest.approx(row[:i + 1], abs=5e-5) and not any(bars[i + 1:]), bars
    weights = [float(w) for w in re.findall(r"\((\d\.\d\d)\)", s["caption"])]
    top = sorted(row[:i + 1], reverse=True)
    assert weights and all(agrees(f"{w:.2f}", t) for w, t in zip(weights, top)), (s["caption"], top[:2])
    # The walk-through of the same row: its softmax bars are the heatmap's row and the softmax of its score bars;
    # the output row of the values chart is the weighted sum of the value rows above it.
    bars = chart(s, "Bar charts: the scores q·k/√d")["data"]
    scores, softmax = bars[0]["y"], bars[1]["y"]
    assert softmax == pytest.approx(row[:i + 1], abs=1e-6)
    e = [math.exp(x - max(scores)) for x in scores]
    assert [x / sum(e) for x in e] == pytest.approx(row[:i + 1], abs=5e-3), (scores, row[:i + 1])  # 2-decimal scores
    values = chart(s, "Heatmap: the value vectors")["data"][0]
    *v, output = values["z"]
    assert len(v) == i + 1 and values["y"][-1].startswith("output")
    weighted = [sum(w * vj[d] for w, vj in zip(row, v)) for d in range(len(output))]
    assert weighted == pytest.approx(output, abs=2e-3), "output = Σ weight × v"
    walk = page.eval_on_selector_all('[data-demo="attention"] .ilab-attn__walk li', "(li) => li.map((x) => x.textContent)")
    assert len(walk) == 5 and f"(token {i})" in walk[0] and f"{i + 1} tokens" in walk[3], walk


def check_kv_cache(page, s, events):
    i = s["step"]
    positions, held = number(r"cache now (\d+) positions, ([\d.]+ \w+)", s["caption"])
    boxes = page.eval_on_selector_all('[data-demo="kv-cache"] .ilab-kv__box',
                                      "(bs) => Object.fromEntries(bs.map((b) => [b.className.split(' ')[1], [Number(b.dataset.x0), Number(b.dataset.x1)]]))")
    assert boxes["ilab-kv__empty"][0] + 0.5 == int(positions), (boxes, s["caption"])  # the grid's filled columns
    with_cache = trace(chart(s, "Bytes of K and V computed so far"), "with the cache: computed once = held")
    assert s["cards"]["kvTotal"] == held == with_cache["text"][i], (s["cards"], with_cache["text"], s["caption"])
    assert boxes["ilab-kv__now"][0] == pytest.approx(i - 0.02)
    prompt, new = map(int, s["cards"]["tokens"].split(" + "))
    assert prompt + new - 1 == int(positions) and new == i + 1, (s["cards"]["tokens"], positions)
    step_ms = chart(s, "Time per step in milliseconds")["data"][0]["y"][i]
    assert agrees(number(r"([\d.]+) ms", s["cards"]["lastStep"])[0], step_ms), (s["cards"]["lastStep"], step_ms)


def check_prefill_decode(page, s, events):
    i = s["step"]
    roof = chart(s, "Log-log roofline")
    point = trace(roof, "this step")
    marks = [t for t in roof["data"] if t["name"] in ("prefill", "decode steps")]
    at = [(t["x"][k], t["y"][k]) for t in marks for k, c in enumerate(t["customdata"]) if c == i]
    assert at == [(point["x"][0], point["y"][0])], (at, point)  # the lit point is this step's forward
    intensity, flops, unit, side, ridge = number(r"([\d.]+) FLOP/byte, ([\d.]+) ([kMGT]?)FLOP/s achieved, (left|right) "
                                                 r"of the ridge \(([\d.]+) FLOP/byte\)", s["caption"])
    assert agrees(intensity, point["x"][0]) and agrees(flops, point["y"][0] / SI[unit]), (s["caption"], point)
    moved = re.search(r"it moved ([\d.]+) ([kMGT]?)B/s", s["caption"])
    if moved:  # the bytes per second this forward moved: its bar on the achieved-rates chart (in GB/s)
        rates = chart(s, "Chart: achieved gigabytes per second")
        bar = [t["y"][t["x"].index(i)] for t in rates["data"] if t["name"].startswith("GB/s moved") and i in t["x"]]
        assert len(bar) == 1 and agrees(moved[1], bar[0] * 1e9 / SI[moved[2]]), (s["caption"], bar)
    roofs = next(t for t in roof["data"] if t["name"].startswith("roofs:"))
    assert agrees(ridge, roofs["x"][1]) and (side == "left") == (point["x"][0] < roofs["x"][1]), (s["caption"], roofs)
    bw, peak = number(r"roofs: ([\d.]+) GB/s, ([\d.]+) GFLOP/s", roofs["name"])
    assert f"{peak} GFLOP/s" in s["caption"] if side == "right" else f"{bw} GB/s" in s["caption"], (s["caption"], roofs["name"])
    bars = chart(s, "Bar chart: milliseconds for each forward pass")["data"][0]["y"]
    assert len(bars) == s["steps"]


def check_flash_attention(page, s, events):
    q, k, qs, qe = map(int, number(r"Query tile (\d+) × key tile (\d+) \(queries (\d+)–(\d+)", s["caption"]))
    grid = chart(s, "Grid")
    lit = grid["shapes"][1]
    assert (lit["x0"] + 0.5, lit["y0"] + 0.5) == (k, q), (lit, s["caption"])
    # The exact (hover) traces follow once the scrubber rests: they must then be this tile's rows.
    page.wait_for_function("(v) => document.querySelector('[data-demo=\"flash-attention\"] [data-exact]')?.dataset.exact.endsWith(v)",
                           arg=f":{q}:{k}")
    stats = chart(page.evaluate(READ, "flash-attention"), "Profiles and heatmap")
    assert stats["title"].startswith(f"Query tile {q} of head ")
    assert stats["data"][0]["y"] == list(range(qs, qe + 1)), (stats["data"][0]["y"], s["caption"])
    computed = sum(map(sum, grid["data"][0]["z"]))
    assert s["cards"]["tiles"].startswith(f"{computed} / ") and s["steps"] == computed, (s["cards"]["tiles"], computed)


def lanes_from_gantt(z: list[list[int]], col: int, prefill=2, decode=3, waiting=1, held=None) -> dict:
    running = [r for r, row in enumerate(z) if row[col] in (prefill, decode)]
    return {"running": len(running), "waiting": sum(row[col] == waiting for row in z),
            "held": sum(row[col] == held for row in z) if held else 0,
            "finished": sum(row[col] in (0, held) and any(c in (prefill, decode) for c in row[:col]) for row in z)
            - (sum(row[col] == held for row in z) if held else 0)}


def assert_drawn_up_to(shapes: list[dict], column: int, last: int, xref: str = "x") -> None:
    """A Gantt panel reads as drawn up to `column`: that column outlined, the columns after it covered."""
    mine = {sh["name"]: (sh["x0"], sh["x1"]) for sh in shapes if sh.get("xref", "x") == xref}
    assert mine["this step"] == (column - 0.5, column + 0.5), (shapes, column)
    assert mine.get("not yet") == ((column + 0.5, last + 0.5) if column < last else None), (shapes, column)


def lanes_on_page(s: dict) -> dict:
    """The counts the waiting / running / finished lanes show (a held slot's chip sits in the running lane)."""
    lanes = s["lanes"]
    held = sum(c["held"] for c in lanes["running"]["chips"])
    return {"running": len(lanes["running"]["chips"]) - held, "waiting": len(lanes["waiting"]["chips"]),
            "finished": len(lanes["finished"]["chips"]), "held": held}


def caption_lanes(caption: str) -> dict:
    running, finishing, waiting, finished = number(
        r"\((\d+) in this pass(?:, (\d+) of them finishing)?, (\d+) waiting, (\d+) finished before\)", caption)
    serves = int(number(r"one forward pass serves (\d+) sequences?", caption)[0])
    assert serves == int(running), caption
    held = re.search(r"(\d+) finished requests? holds? (?:its|their) slots? idle", caption)
    return {"running": int(running), "waiting": int(waiting), "finished": int(finished), "held": int(held[1]) if held else 0}


def check_serving_load(page, s, events):
    i = s["step"]
    passes = chart(s, "Gantt chart")
    gantt = passes["data"][0]["z"]
    assert_drawn_up_to(passes["shapes"], i, len(gantt[0]) - 1)
    lanes = caption_lanes(s["caption"])
    assert lanes == lanes_from_gantt(gantt, i) == lanes_on_page(s), (s["caption"], [row[: i + 1] for row in gantt])
    t = float(number(r"^Step \d+ \(([\d.]+) s\)", s["caption"])[0])
    tokens = chart(s, "Line chart: tokens generated so far")["data"][0]
    assert agrees(f"{t:.2f}", tokens["x"][i + 1]), (t, tokens["x"][: i + 2])
    assert tokens["y"][i + 1] - tokens["y"][i] == lanes["running"], "each sequence in the pass made one token"


def check_batching(page, s, events):
    step, mode = number(r"^Step (\d+) \((\w+)\)", s["caption"])
    gantts = chart(s, "Gantt chart per mode")["data"]
    occupancy = chart(s, "Line chart: sequences in the batch")
    modes = [t["name"].split(":")[0] for t in occupancy["data"] if t["name"] != "slots"]
    panel = modes.index(mode)
    z = gantts[panel]["z"]
    lanes = caption_lanes(s["caption"])
    assert lanes == lanes_from_gantt(z, int(step), held=4) == lanes_on_page(s), (s["caption"], [row[: int(step) + 1] for row in z])
    xref = "x" if panel == 0 else f"x{panel + 1}"
    assert_drawn_up_to(chart(s, "Gantt chart per mode")["shapes"], int(step), len(z[0]) - 1, xref)
    assert trace(occupancy, f"{mode}: sequences computed")["y"][int(step)] == lanes["running"]


def check_speculative(page, s, events):
    outcomes = page.eval_on_selector_all('[data-demo="speculative"] .ilab-spec__text [data-outcome]',
                                         "(xs) => xs.map((x) => x.dataset.outcome)")
    proposed = re.search(r"the draft proposed (\d+) tokens?", s["caption"])
    drafted = [o for o in outcomes if o in ("accepted", "rejected", "not_reached")]
    assert len(drafted) == (int(proposed[1]) if proposed else 0), (s["caption"], outcomes)
    accepted = outcomes.count("accepted")
    if "accepted all" in s["caption"] or "accepted it" in s["caption"]:
        assert accepted == len(drafted)
    elif proposed:
        said = number(r"accepted (none|\d+)", s["caption"])[0]
        assert accepted == (0 if said == "none" else int(said)), (s["caption"], outcomes)
    if proposed:
        assert ("bonus" in outcomes) == ("bonus token" in s["caption"]), (s["caption"], outcomes)
    else:  # no guesses: the target's one token
        assert len(outcomes) == 1 and "1 token for one target pass" in s["caption"] or "first token" in s["caption"]
    round_no = int(number(r"^Round (\d+)", s["caption"])[0])
    table = page.inner_text('[data-demo="speculative"] table caption') if proposed else f"Round {round_no}"
    assert table.startswith(f"Round {round_no}"), table
    # The cards (the run's totals) and the charts (the same run) count the same guesses and passes.
    by_pos = chart(s, "Bar chart: fraction of guesses accepted")["data"][0]
    acc, total = map(int, s["cards"]["accept"].split(" / "))
    assert total == sum(by_pos["customdata"]) and acc == round(sum(r * d for r, d in zip(by_pos["y"], by_pos["customdata"])))
    passes = chart(s, "Line chart: target passes per token")["data"][0]
    assert int(s["cards"]["rounds"]) == len(passes["x"]) == s["steps"]
    assert agrees(s["cards"]["passPerTok"], passes["y"][-1]), (s["cards"], passes)
    assert agrees(s["cards"]["perPass"], passes["x"][-1] / len(passes["x"])), (s["cards"], passes)
    assert "paused" not in s["caption"], "a non-adaptive run never pauses drafting"


def check_paged_attention(page, s, events):
    pool = chart(s, "Grid of physical KV blocks")["data"][0]["customdata"]
    used = sum(state in ("owned", "shared") for state in pool)
    in_use, total = map(int, number(r"(\d+) of (\d+) blocks in use", s["caption"]))
    assert (in_use, total) == (used, len(pool)), (s["caption"], pool)
    card_used, card_free = map(int, s["cards"]["blocks"].split(" / "))
    assert (card_used, card_used + card_free) == (used, len(pool)), s["cards"]["blocks"]
    slots = chart(s, "Line chart per step: token slots")
    if s["step"] < s["steps"] - 1:
        step = int(number(r"^Step (\d+):", s["caption"])[0])
        assert s["cards"]["step"] == str(step)
        allocated = trace(slots, "paged: allocated blocks")["y"][step]
        reserved = trace(slots, "contiguous: prompt + max new reserved")["y"][step]
        assert s["cards"]["paged"].startswith(f"{allocated}, ") and s["cards"]["contig"].startswith(f"{reserved}, ")
    else:
        assert s["cards"]["step"] == "end" and s["caption"].startswith("End of the run")
        # No forward ran: no step's slot counts (they used to keep those of the step drawn before).
        assert s["cards"]["paged"].startswith("–") and s["cards"]["contig"].startswith("–"), s["cards"]


def check_prefix_caching(page, s, events):
    strips = chart(s, "Block strips")["data"][0]
    seen: set[str] = set()
    reused = computed = 0
    lit = []
    for r, (ids, words) in enumerate(zip(strips["text"], strips["customdata"])):
        for c, (block, word) in enumerate(zip(ids, words)):
            if not block:
                assert not word
                continue
            # A physical block first met in an earlier row was computed there; met again, it is reused.
            again = block in seen
            seen.add(block)
            reused, computed = reused + again, computed + (not again)
            assert word.startswith("reused") == again or word == "reused from here now", (block, word, strips)
            if word in ("computed now", "reused now"):
                lit.append((strips["y"][r], c, block, word))
    if s["caption"].split(", ")[1].startswith("the run is over"):
        got = number(r"(\d+) of (\d+) prompt blocks reused \((\d+) of (\d+) prompt tokens.*\), (\d+) computed", s["caption"])
        assert [int(got[0]), int(got[1]), int(got[4])] == [reused, reused + computed, computed] and not lit, s["caption"]
        if "with the prefix cache" in s["caption"].lower():
            assert s["cards"]["skipped"] == got[2] and f"({got[2]} of {got[3]} prompt tokens)" in s["cards"]["hit"], s["cards"]
        return
    got = number(r"So far (\d+) of (\d+) prompt blocks reused, (\d+) computed", s["caption"])
    assert list(map(int, got)) == [reused, reused + computed, computed], (s["caption"], strips)
    assert len(lit) == 1, lit  # one block looked up per step: the caption's
    question, column, block, word = lit[0]
    assert f"{question}'s block {column} " in s["caption"], (s["caption"], lit)
    assert ("a hit" in s["caption"]) == (word == "reused now") and f"physical block {block}" in s["caption"]
    prompt = next(e["prompt_len"] for e in events if e["type"] == "request_queued" and e["request_id"] == question)
    assert s["cards"]["prompt"] == str(prompt), s["cards"]


def check_quantization(page, s, events):
    block = number(r"^Block (\d+) of (\d+) .*: scale ([\d.e+-]+), max error ([\d.e+-]+); (an outlier|no outlier)",
                   s["caption"])
    errors = chart(s, "Scatter chart: each block's largest weight")
    ring = errors["shapes"][0]
    walked = trace(errors, "walked blocks")
    b = int(block[0]) - 1
    assert (ring["xanchor"], ring["yanchor"]) == (walked["x"][b], walked["y"][b]), (ring, b)
    assert agrees(block[3], ring["yanchor"]), (s["caption"], ring)
    pic = chart(s, "Histogram of one block's weights")
    marker = pic["data"][3]["name"]
    assert (marker == "outlier (set the scale)") == (block[4] == "an outlier"), (marker, s["caption"])
    # The run's cards and charts: decode speeds from the per-step medians the comparison chart draws, bytes streamed
    # from the trade-off chart.
    fp32, quant = map(float, number(r"^([\d.]+) / ([\d.]+)", s["cards"]["speed"]))
    per_step = chart(s, "Your recent runs")["data"][0]
    assert agrees(f"{fp32:.1f}", 1000 / per_step["y"][0]) and agrees(f"{quant:.1f}", 1000 / per_step["y"][1])
    trade = chart(s, "Scatter chart: weight bytes against perplexity")
    before, after = map(float, number(r"^([\d.]+) MiB → ([\d.]+) MiB", s["cards"]["stream"]))
    assert agrees(f"{before:g}", trace(trade, "fp32")["x"][0]) and agrees(f"{after:g}", trace(trade, per_step["x"][1])["x"][0])


def check_sampling(page, s, events):
    bars = chart(s, "Horizontal bar chart: the 20 most likely next tokens")
    before, kept, cut = (trace(bars, name)["x"] for name in ("before temperature", "after temperature, kept",
                                                             "after temperature, cut"))
    moved = number(r"moves '.*?' from ([\d.]+)% to ([\d.]+)%; .* keeps? ([\d,]+) tokens? ", s["caption"])
    assert agrees(moved[0], before[0] * 100) and agrees(moved[1], (kept[0] if kept[0] is not None else cut[0]) * 100)
    n = int(moved[2].replace(",", ""))
    assert [x is not None for x in kept] == [i < n for i in range(len(before))], (s["caption"], kept)
    if "a token outside the" in s["caption"]:  # drawn from below the 20 listed: no star to agree with
        return
    star = trace(bars, "drawn")["y"][0]
    drawn = number(r"drawn: (.*) \((?:the most likely|number (\d+) in the ranking), ([\d.]+)% after", s["caption"])
    assert star.split(". ", 1)[1] == drawn[0] and int(star.split(".")[0]) == int(drawn[1] or 1)
    used = trace(bars, "what the draw used")
    assert agrees(drawn[2], used["x"][used["y"].index(star)] * 100), (s["caption"], used)


def check_long_context(page, s, events):
    """The caption's perplexity is the marked point's, its ratio and the full cache's figure the dashed line's; the
    kept panel has one row per policy measured so far at the caption's budget, each holding that many tokens."""
    c = chart(s, "Perplexity against cache budget")
    mark = trace(c, "this step")
    kept = [t for t in c["data"] if t["z"] is not None]
    assert len(kept) == 1, c["data"]
    if s["caption"].startswith("Full cache"):
        (ppl,) = number(r"last \d+ tokens is ([\d.]+);", s["caption"])
        assert agrees(ppl, mark["y"][0]) and s["cards"]["ppl"].startswith(ppl)
        assert len(kept[0]["z"]) == 1 and min(kept[0]["z"][0]) == 1
        return
    budget, ppl, ratio, full = number(r"^A cache of (\d+) of .*perplexity is ([\d.]+), ([\d.]+)× the full cache's ([\d.]+)\.",
                                      s["caption"])
    assert mark["x"] == [int(budget)] and agrees(ppl, mark["y"][0]) and s["cards"]["ppl"].startswith(ppl)
    (line,) = [sh for sh in c["shapes"] if sh.get("yref") == "y"]
    assert agrees(full, line["y0"]) and agrees(ratio, mark["y"][0] / line["y0"])
    others = s["caption"].partition(" so far: ")[2]
    assert len(kept[0]["y"]) == 1 + (len(others.split("; ")) if others else 0), (kept[0]["y"], s["caption"])
    for row in kept[0]["z"]:
        assert abs(sum(row) - int(budget)) < 0.1, (budget, sum(row))


def check_tensor_parallel(page, s, events):
    """Each rank's compute and communication in the caption are the bars of the step shown (the last of each series);
    the run's totals are the decode steps' bars summed; the token cards are the steps' tokens so far."""
    if s["caption"].startswith(("Tensor parallel", "Pipeline")):
        plan = events[0] if events[0]["type"] == "parallel_plan" else {}
        assert s["cards"]["split"] == plan.get("split"), s["cards"]
        return
    assert s["cards"]["split"] == events[0]["split"], s["cards"]  # every step names the split
    bars = chart(s, "Picture of this step: stacked bars")
    series = {r: (trace(bars, f"rank {r} compute")["y"], trace(bars, f"rank {r} communication")["y"]) for r in (0, 1)}
    steps = [e for e in events if e["type"] == "parallel_step"]
    if s["caption"].startswith("Step "):
        shown = int(number(r"^Step (\d+)", s["caption"])[0])
        for r, (compute, comm) in series.items():
            got = number(rf"rank {r} computed ([\d.]+) ms and spent ([\d.]+) ms", s["caption"])
            assert len(compute) == shown + 1 and agrees(got[0], compute[-1]) and agrees(got[1], comm[-1]), (got, compute)
        token = number(r"The ranks chose '(.*?)', ", s["caption"])[0]
        assert s["cards"]["tokens"] == "".join(e["token_text"] for e in steps[:shown + 1])
        assert s["cards"]["tokens"].endswith(token.replace("⏎", "\n"))
        return
    assert s["caption"].startswith("All ") and s["cards"]["same"] == "yes, every token", s
    for r, (compute, comm) in series.items():
        got = number(rf"rank {r} computed ([\d.]+) ms and communicated ([\d.]+) ms", s["caption"])
        assert agrees(got[0], sum(compute[1:])) and agrees(got[1], sum(comm[1:])), (got, compute, comm)
    assert s["cards"]["reference"] == s["cards"]["tokens"]


def check_attention_variants(page, s, events):
    """The heads step's 'most at' tokens are the heatmap rows' maxima; a variant's cache, KL and top-1 figures are its
    bar, its diamond and its cards; the budget step's Llama figures are its bars."""
    c = chart(s, "Picture of this step")
    if s["caption"].startswith("Layer"):
        heat = c["data"][0]
        looks = number(r"most at (.*)\. The", s["caption"])[0].split(", ")
        group = len(looks)
        tops = [heat["x"][row.index(max(row))].split(": ", 1)[1].replace("␣", "").strip() for row in heat["z"][:group]]
        assert [t.strip("'") for t in looks] == tops, (looks, tops)
        return
    if s["caption"].startswith("In bf16"):
        per, mha = number(r"caches ([\d.]+) KiB a token .* it would be ([\d.]+) KiB", s["caption"])
        bars = dict(zip(c["data"][0]["y"], c["data"][0]["x"]))
        assert agrees(per, bars["Llama 3 8B"]) and agrees(mha, bars["Llama 3 8B as MHA"])
        return
    cache = trace(c, "cache for the prompt (KiB)")
    kl = trace(c, "mean KL (nats)")
    label = s["caption"].split(": the cache holds")[0]
    i = cache["x"].index(label)
    held = number(r"the cache holds ([\d.]+) (KiB|MiB)", s["caption"])
    assert agrees(held[0], cache["y"][i] / (1024 if held[1] == "MiB" else 1)), (held, cache["y"][i])
    assert s["cards"]["variant"] == label and s["cards"]["kl"] == f"{kl['y'][i]:.3f} nats"
    if "moved by" in s["caption"]:
        moved, same = number(r"moved by ([\d.]+) nats .* same at (\d+)% of", s["caption"])
        assert agrees(moved, kl["y"][i]) and s["cards"]["top1"].startswith(f"{same}% of")


def check_token_cost(page, s, events):
    """A batch's price per million and time per token are its bar and its point on the line (the newest drawn); the
    summary's interactive and batched prices are the first and the lowest bar."""
    c = chart(s, "Cost per million tokens by batch size")
    cost, tpot = trace(c, "$ per million tokens"), trace(c, "time per token (ms)")
    if s["caption"].startswith("Batch "):
        batch, usd, waited = number(r"^Batch (\d+): .* cost \$([\d.,]+); each request waited (\d+) ms", s["caption"])
        assert cost["x"][-1] == batch and agrees(usd.replace(",", ""), cost["y"][-1]), (usd, cost)
        assert abs(int(waited) - tpot["y"][-1]) <= 0.5 and s["cards"]["tpot"] == f"{waited} ms"
        assert s["cards"]["batch"] == batch and s["cards"]["cost"] == f"${usd}"
        return
    alone, batch, batched = number(r"at a time: \$([\d.,]+) a million tokens\. Batched \((\d+) at once\): \$([\d.,]+),",
                                   s["caption"])
    assert agrees(alone.replace(",", ""), cost["y"][0]) and agrees(batched.replace(",", ""), min(cost["y"]))
    assert cost["x"][cost["y"].index(min(cost["y"]))] == batch


def check_gguf_inspect(page, s, events):
    """The file step's sizes are the bars' sum and the file's; a tensor step's bytes are its bar (the marked one), its
    first code and weight are the block's first bar and point, and the engine's points are the dequantized ones."""
    c = chart(s, "Picture of this step: bytes per tensor")
    bars = [t for t in c["data"] if t["name"].endswith(" tensors")]
    kib = {x: y for t in bars for x, y in zip(t["x"], t["y"])}
    f = events[0]
    if s["caption"].startswith(f["file_name"]):
        data = number(r"the tensor data ([\d.]+) MiB", s["caption"])[0]
        assert agrees(data, sum(kib.values()) / 1024) and agrees(data, (f["file_bytes"] - f["data_offset"]) / 2**20)
        assert c["shapes"] == [] and s["cards"]["tensor"] == f"{f['n_tensors']} tensors"
        return
    index, name, size, unit = number(r"^Tensor (\d+) of \d+, ([\w.]+): .* ([\d.]+) (KiB|MiB) at byte", s["caption"])
    i = int(index) - 1
    assert c["shapes"][0]["x0"] == i and s["cards"]["tensor"] == name
    assert agrees(size, kib[i] / (1024 if unit == "MiB" else 1)), (size, kib[i])
    points, engine = trace(c, "dequantized")["y"], trace(c, "engine's values")["y"]
    assert engine == points and s["cards"]["engine"] == "identical"
    if "the first code" in s["caption"]:
        code, weight = number(r"the first code, (-?\d+), gives (-?[\d.e-]+)\.", s["caption"])
        assert int(code) == trace(c, "stored codes")["y"][0] and float(weight) == pytest.approx(points[0], rel=1e-3)
    else:
        assert float(number(r"the first (-?[\d.e-]+)\.", s["caption"])[0]) == pytest.approx(points[0], rel=1e-3)


CHECKS = {
    "attention": check_attention, "kv-cache": check_kv_cache, "prefill-decode": check_prefill_decode,
    "flash-attention": check_flash_attention, "serving-load": check_serving_load, "speculative": check_speculative,
    "paged-attention": check_paged_attention, "batching": check_batching, "prefix-caching": check_prefix_caching,
    "quantization": check_quantization, "sampling": check_sampling, "long-context": check_long_context,
    "tensor-parallel": check_tensor_parallel, "attention-variants": check_attention_variants,
    "token-cost": check_token_cost, "gguf-inspect": check_gguf_inspect,
}


def check_any(page, s, events):
    """A demo without its own check yet: its caption at least says something at every step."""
    assert s["caption"].strip(), s


def registered_demos() -> list[str]:
    from demos.registry import DEMOS

    return sorted(DEMOS)


@pytest.fixture(scope="module")
def page(chromium, recorded_runs):
    context, page, _server = stand_in_page(chromium, recorded_runs, viewport={"width": 1280, "height": 900})
    yield page
    context.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("demo", registered_demos())
def test_caption_cards_and_chart_agree_at_the_first_middle_and_last_step(live_server, page, recorded_runs, demo):
    page.errors.clear()
    page.goto(f"{live_server.url}/demos/{demo}/")
    root = page.locator(f'.ilab-demo[data-demo="{demo}"]')
    root.locator(".ilab-run").click()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo[data-demo=\"{demo}\"]').dataset.state === 'done'",
                           timeout=30_000)
    steps = timeline_state(page, demo)["steps"]
    if demo not in CHECKS and steps == 0:
        pytest.skip(f"{demo} has no step timeline yet (and no agreement check of its own)")
    assert steps >= 3, (demo, steps)
    for index in (0, steps // 2, steps - 1):
        scrub_to(page, demo, index)
        page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        state = page.evaluate(READ, demo)
        assert state["step"] == index
        CHECKS.get(demo, check_any)(page, state, recorded_runs[demo])
    assert page.errors == [], page.errors
