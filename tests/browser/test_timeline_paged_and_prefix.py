"""The paged-attention and prefix-caching demos' step timelines in a real browser, on runs recorded from their real
runners (stand_in.py): scrubbing to a middle step redraws the block pool (which blocks are owned, shared, free,
and what changed since the step before), the block tables and the caption for that step; a share link does the
same. The expected pictures are rebuilt here from the events themselves, independently of the page's code."""
from __future__ import annotations

import os

import pytest

from stand_in import scrub_to, store_finished_run, timeline_state

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

POOL = """() => { const gd = document.querySelector('[data-demo="paged-attention"] .js-plotly-plot');
  const t = gd.data[0]; return {state: t.customdata, op: t.meta, text: t.text}; }"""
TABLES = """() => [...document.querySelectorAll('[data-demo="paged-attention"] tbody tr[data-request]')].map((tr) =>
  [tr.dataset.request, [...tr.querySelectorAll('td:nth-child(3) span')].map((s) => [s.textContent, s.dataset.op || ''])])"""
STRIPS = """() => { const gd = document.querySelector('[data-demo="prefix-caching"] .js-plotly-plot');
  const t = gd.data[0]; return {y: t.y, words: t.customdata, text: t.text, title: gd.layout.title.text}; }"""


def pool_at(events: list[dict], index: int) -> dict:
    """The paged pool as timeline step `index` shows it (step i: the i-th batch_step; the last: after the run):
    each block's state and the operation that last touched it since the previous step, and each block table."""
    nb = next(e["num_blocks"] for e in events if e["type"] == "batch_run_started")
    owners: dict[int, list[str]] = {}
    cached: set[int] = set()
    tables: dict[str, dict[int, int]] = {}
    touched: dict[int, tuple[str, str]] = {}
    preempted: set[str] = set()
    changed: dict[str, dict[int, str]] = {}
    seen = -1
    for e in events:
        if e["type"] in ("batch_step", "batch_run_finished"):
            seen += 1
            if seen == index:
                break
            touched, preempted, changed = {}, set(), {}
        elif e["type"] == "request_queued":
            tables[e["request_id"]] = {}
        elif e["type"] == "preemption":
            preempted.add(e["request_id"])
        elif e["type"] == "kv_block":
            b, rid = e["block"], e["request_id"]
            if e["op"] in ("allocated", "shared"):
                owners.setdefault(b, []).append(rid)
                tables[rid][e["logical_index"]] = b
                changed.setdefault(rid, {})[e["logical_index"]] = e["op"]
            elif e["op"] == "freed":
                owners[b].remove(rid)
                if not owners[b]:
                    del owners[b]
                del tables[rid][e["logical_index"]]
            elif e["op"] == "cached":
                cached.add(b)
            elif e["op"] == "evicted":
                cached.discard(b)
            if e["op"] in ("allocated", "shared", "freed"):
                touched[b] = (e["op"], rid)
    state = [("shared" if len(owners[b]) > 1 else "owned") if b in owners else "cached" if b in cached else "free"
             for b in range(nb)]
    op = ["" if b not in touched else "preempted" if touched[b][0] == "freed" and touched[b][1] in preempted
          else touched[b][0] for b in range(nb)]
    return {"state": state, "op": op, "used": len(owners), "nb": nb,
            "tables": [[rid, [[f"{i}→{t[i]}", changed.get(rid, {}).get(i, "")] for i in sorted(t)]]
                       for rid, t in tables.items()]}


def forwards(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "batch_step"]


def open_demo(page, url: str, demo: str) -> None:
    page.goto(url)
    page.locator(f'[data-demo="{demo}"] .ilab-run').first.wait_for()


def finish_run(page, demo: str) -> None:
    page.locator(f'[data-demo="{demo}"] .ilab-run').click()
    page.wait_for_function(f"() => document.querySelector('[data-demo=\"{demo}\"]').dataset.state === 'done'",
                           timeout=30_000)


def assert_paged_step(page, events: list[dict], index: int) -> None:
    state = scrub_to(page, "paged-attention", index)
    want = pool_at(events, index)
    page.wait_for_function(f"() => ({POOL})().state.length === {want['nb']}")
    pool = page.evaluate(POOL)
    assert pool["state"] == want["state"], (index, pool, want)
    assert pool["op"] == want["op"], (index, pool["op"], want["op"])
    assert page.evaluate(TABLES) == want["tables"]
    step = forwards(events)[index]["step"]
    assert state["caption"].startswith(f"Step {step}: ")
    assert f"{want['used']} of {want['nb']} blocks in use." in state["caption"], state["caption"]
    assert page.locator('[data-demo="paged-attention"] dd[data-out="step"]').inner_text() == str(step)
    assert page.get_by_test_id("slots-now").get_attribute("data-step") == str(step)  # the line on the slot chart


def paged_middle(events: list[dict]) -> int:
    """A middle step where a block was allocated since the step before, while others hold K/V."""
    n = len(forwards(events))
    for index in list(range(n // 2, n)) + list(range(n // 2)):
        want = pool_at(events, index)
        if "allocated" in want["op"] and want["state"].count("owned") > want["op"].count("allocated"):
            return index
    raise AssertionError("no step allocates a block beside blocks held")


@pytest.mark.django_db(transaction=True)
def test_scrubbing_a_paged_run_redraws_the_pool_tables_and_caption_of_that_step(live_server, stand_in, recorded_runs):
    events = recorded_runs["paged-attention"]
    page = stand_in
    open_demo(page, f"{live_server.url}/demos/paged-attention/", "paged-attention")
    finish_run(page, "paged-attention")
    total = len(forwards(events)) + 1  # every forward, and the pool after the run
    assert timeline_state(page, "paged-attention")["steps"] == total
    # A finished run shows its end: every block free again.
    end = page.evaluate(POOL)
    assert set(end["state"]) <= {"free", "cached"} and end["op"].count("freed") > 0
    assert timeline_state(page, "paged-attention")["caption"].startswith("End of the run: ")
    middle = paged_middle(events)
    assert 0 < middle < total - 1
    assert_paged_step(page, events, middle)
    assert_paged_step(page, events, 0)  # the first forward: only the first request's prompt blocks, all new
    assert set(page.evaluate(POOL)["op"]) == {"allocated", ""}
    assert page.errors == []


@pytest.mark.django_db(transaction=True)
def test_a_preemption_step_outlines_the_victims_freed_blocks_and_says_so(live_server, stand_in, recorded_runs):
    """A pool too small for the requests: the step after a preemption outlines the blocks it gave back."""
    from demos.registry import DEMOS, validate
    from workers.serving import LoadedModels

    params = {"num_blocks": 6, "block_size": 4, "max_new_tokens": 5, "arrival_every": 0,
              "prompts": "The capital of France is\ndef add(a, b):\nOne, two, three,"}
    events = list(DEMOS["paged-attention"].load_runner()(validate("paged-attention", params), models=LoadedModels()))
    preempt = next(i for i, e in enumerate(events) if e["type"] == "preemption")
    index = sum(1 for e in events[:preempt] if e["type"] == "batch_step")  # the step it happened before
    page = stand_in
    page.server.runs = {**recorded_runs, "paged-attention": events}
    open_demo(page, f"{live_server.url}/demos/paged-attention/", "paged-attention")
    finish_run(page, "paged-attention")
    assert_paged_step(page, events, index)
    assert "preempted" in page.evaluate(POOL)["op"]
    victim = events[preempt]["request_id"]
    assert f"out of blocks: {victim} was preempted and gave back" in timeline_state(page, "paged-attention")["caption"]
    assert page.errors == []


def prefix_timeline(events: list[dict]) -> list[dict]:
    """The prefix-caching timeline rebuilt from the events: a step per prompt block of each question's first
    prefill ({cached, question, block, step}), and one at each run's end ({cached, question: None})."""
    out: list[dict] = []
    cached, bs, prompt, seen = False, 0, {}, set()
    for e in events:
        if e["type"] == "batch_run_started":
            cached, bs, prompt, seen = e["prefix_caching"], e["block_size"], {}, set()
        elif e["type"] == "request_queued":
            prompt[e["request_id"]] = e["prompt_len"]
        elif e["type"] == "batch_step":
            for x in e["entries"]:
                if x["phase"] == "prefill" and x["request_id"] not in seen:
                    seen.add(x["request_id"])
                    out += [{"cached": cached, "question": x["request_id"], "block": i, "step": e["step"], "bs": bs}
                            for i in range(-(-prompt[x["request_id"]] // bs))]
        elif e["type"] == "batch_run_finished":
            out.append({"cached": cached, "question": None})
    return out


@pytest.mark.django_db(transaction=True)
def test_scrubbing_a_prefix_run_lights_up_the_blocks_a_later_question_reuses(live_server, stand_in, recorded_runs):
    events = recorded_runs["prefix-caching"]
    page = stand_in
    open_demo(page, f"{live_server.url}/demos/prefix-caching/", "prefix-caching")
    finish_run(page, "prefix-caching")
    assert_prefix_step(page, events)
    assert page.errors == []


def assert_prefix_step(page, events: list[dict]) -> None:
    """At the step of q1's last reused block (the cached run), q1's row is filled up to that block, reused, the
    block lit, the rest blank; q0's row lights the same physical block where it computed it; the caption says so."""
    cached_run = events[max(i for i, e in enumerate(events) if e["type"] == "batch_run_started"):]
    shared = [e for e in cached_run if e["type"] == "kv_block" and e["op"] == "shared" and e["request_id"] == "q1"]
    q0 = [e["block"] for e in cached_run if e["type"] == "kv_block" and e["request_id"] == "q0"
          and e["op"] == "allocated"]
    assert shared
    timeline = prefix_timeline(events)
    last = len(shared) - 1
    index = next(i for i, t in enumerate(timeline) if t["cached"] and t["question"] == "q1" and t["block"] == last)
    state = scrub_to(page, "prefix-caching", index)
    assert state["steps"] == len(timeline)
    strips = page.evaluate(STRIPS)
    assert strips["y"] == ["q0", "q1"] and strips["title"] == "Prompt blocks with the prefix cache"
    q0_row, q1_row = strips["words"]
    assert q1_row == ["reused"] * last + ["reused now"] + [""] * (len(q1_row) - last - 1), q1_row
    # The block q1 reuses lights up in q0's row, where it was computed: the same physical id.
    assert q0_row[last] == "reused from here now" and q0_row.count("reused from here now") == 1, q0_row
    assert strips["text"][1][:last + 1] == strips["text"][0][:last + 1] == [str(b) for b in q0[:last + 1]]
    bs = timeline[index]["bs"]
    assert state["caption"].startswith(f"With the prefix cache, step {timeline[index]['step']}: q1's block {last} "
                                       f"(prompt tokens {last * bs}–{last * bs + bs - 1}) is looked up"), state["caption"]
    assert f"a hit, so physical block {q0[last]}, which q0 computed, is reused" in state["caption"]
    # The run without the cache, at q0's second block: computed, nothing looked up, the rest of the row blank.
    scrub_to(page, "prefix-caching", 1)
    strips = page.evaluate(STRIPS)
    assert strips["title"] == "Prompt blocks without the prefix cache"
    assert strips["words"][0][:3] == ["computed", "computed now", ""]
    assert "nothing is looked up" in timeline_state(page, "prefix-caching")["caption"]


def store_shared_run(demo: str, events: list[dict]) -> str:
    """A finished run of `demo` in the database, as a worker stores one; its share id."""
    return store_finished_run(demo, events).share_id


@pytest.mark.django_db(transaction=True)
def test_a_share_link_scrubs_through_the_same_steps(live_server, stand_in, recorded_runs):
    page = stand_in
    paged = recorded_runs["paged-attention"]
    page.goto(f"{live_server.url}/demos/runs/{store_shared_run('paged-attention', paged)}/")
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'shared'", timeout=30_000)
    assert timeline_state(page, "paged-attention")["steps"] == len(forwards(paged)) + 1
    assert_paged_step(page, paged, paged_middle(paged))

    prefix = recorded_runs["prefix-caching"]
    page.goto(f"{live_server.url}/demos/runs/{store_shared_run('prefix-caching', prefix)}/")
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.state === 'shared'", timeout=30_000)
    assert_prefix_step(page, prefix)
    assert page.errors == []


# One scrubber move per animation frame, as a drag delivers them, for `ms`; the frame rate is the timeline's
# drawn steps (its `ilab:step` events) per second.
SCRUB_RATE = """async ([demo, ms, scrub]) => {
  const t = document.querySelector(`[data-demo="${demo}"] .ilab-timeline`);
  const range = t.querySelector('input[type=range]');
  const n = Number(t.dataset.steps);
  let drawn = 0;
  const count = () => { drawn += 1; };
  t.addEventListener('ilab:step', count);
  let frames = 0;
  const t0 = performance.now();
  let i = 0;
  await new Promise((done) => {
    const move = () => {
      frames += 1;
      i = (i + 1) % n;
      if (scrub) {
        range.value = String(i);
        range.dispatchEvent(new Event('input', {bubbles: true}));
      }
      if (performance.now() - t0 < ms) requestAnimationFrame(move); else done();
    };
    requestAnimationFrame(move);
  });
  t.removeEventListener('ilab:step', count);
  const s = (performance.now() - t0) / 1000;
  return scrub ? drawn / s : frames / s;
}"""

# The largest runs the specs allow: six prompts filling the 200-token limit, 24 new tokens each, 4-token blocks in
# a 64-block pool, arrivals 8 steps apart; four questions filling 120 tokens, 16 new tokens, 8-token blocks.
LONG_PROMPT = "Write a long and careful story about the sea, the wind, the old harbour and its lighthouse keeper"
LARGEST = {
    "paged-attention": {"prompts": "\n".join(f"{LONG_PROMPT} number {i}." for i in range(6)), "max_new_tokens": 24,
                        "block_size": 4, "num_blocks": 64, "arrival_every": 8},
    "prefix-caching": {"questions": "\n".join(f"What does the library do about late returns of item kind {i}, in detail?"
                                              for i in range(4)), "max_new_tokens": 16, "block_size": 8},
}


def streamed_runs(demo: str, params: dict) -> list[dict]:
    """The demo's events up to its last scheduler run's end (the timing repeats after it draw no steps)."""
    from demos.registry import DEMOS, validate
    from workers.serving import LoadedModels

    events, runs = [], 2 if demo == "prefix-caching" else 1
    for e in DEMOS[demo].load_runner()(validate(demo, params), models=LoadedModels()):
        events.append(e)
        runs -= e["type"] == "batch_run_finished"
        if not runs:
            break
    return events


@pytest.mark.skipif(not os.environ.get("MEASURE_TIMELINE_FPS"), reason="a measurement: MEASURE_TIMELINE_FPS=1 runs it")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("demo", ["paged-attention", "prefix-caching"])
def test_scrubbing_the_largest_run_stays_at_30_frames_per_second(live_server, stand_in, recorded_runs, demo):
    """The issue's bound (≥ 30 frames/s on the 2-core box), as the median of three 2-second drags, printed beside
    the idle page's frame rate under the same load (a box busy with other work slows both)."""
    page = stand_in
    page.server.runs = {**recorded_runs, demo: streamed_runs(demo, LARGEST[demo])}
    open_demo(page, f"{live_server.url}/demos/{demo}/", demo)
    finish_run(page, demo)
    rates, idle = [], []
    for _ in range(3):  # interleaved with the page's frame rate while nothing is drawn, under the same load
        idle.append(page.evaluate(SCRUB_RATE, [demo, 2000, False]))
        rates.append(page.evaluate(SCRUB_RATE, [demo, 2000, True]))
    rates.sort(), idle.sort()
    print(f"{demo}: {timeline_state(page, demo)['steps']} steps, scrubbing at {[round(r, 1) for r in rates]} frames/s;"
          f" the idle page at {[round(r, 1) for r in idle]}")
    assert rates[1] >= 30, rates
    assert page.errors == []
