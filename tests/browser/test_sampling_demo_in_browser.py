"""The sampling demo in Chromium, on a run recorded from its real runner and replayed over the stand-in websocket:
after Run the timeline has one step per token; moving the scrubber redraws the bar chart from that step's
`sampling_step` event (the probabilities before and after temperature, the kept tokens in blue and the cut ones
in orange, the star on the token drawn) and the caption under it says the same numbers. In the lesson, the stored
reference run is drawn before any run and the scrubber moves it too."""
from __future__ import annotations

import json

import pytest

from courseapp.loader import load_course
from demos.registry import DEMOS, validate
from stand_in import SMALL_PARAMS, scrub_to, timeline_state

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

DONE = "() => ['done', 'shared'].includes(document.querySelector('.ilab-demo').dataset.state)"
CHART = """() => { const gd = document.querySelector('.ilab-demo .js-plotly-plot');
  return {names: gd.data.map((t) => t.name), before: gd.data[0].x, kept: gd.data[1].x, cut: gd.data[2].x,
          labels: gd.data[0].y, star: gd.data[4] ? gd.data[4].y : null, step: gd.dataset.step,
          summary: gd.closest('figure').querySelector('figcaption').textContent}; }"""


@pytest.fixture(scope="module")
def recorded_runs(loaded_models) -> dict[str, list[dict]]:
    """Only this demo's run, as stand_in.record_runs records it (at a temperature, with a cut: some bars cut)."""
    params = validate("sampling", {**SMALL_PARAMS["sampling"], "temperature": 1.2, "top_p": 0.8, "min_p": 0.02})
    return {"sampling": json.loads(json.dumps(list(DEMOS["sampling"].load_runner()(params, models=loaded_models))))}


def quote(text: str) -> str:
    """A token as sampling-steps.js quotes it: JSON escapes inside single quotes."""
    return "'" + json.dumps(text, ensure_ascii=False)[1:-1].replace("'", "\\'") + "'"


def assert_step(page, steps: list[dict], i: int) -> None:
    state = scrub_to(page, "sampling", i)
    ev = steps[i]
    assert state["steps"] == len(steps) and state["step"] == i
    assert state["caption"].startswith(f"Step {i + 1} of {len(steps)}: ")
    chart = page.evaluate(CHART)
    assert chart["step"] == str(i) and chart["summary"] == state["caption"]  # one step state, two views
    assert chart["before"] == pytest.approx(ev["probs"])
    kept = min(ev["n_kept"], len(ev["top_ids"]))
    assert [x for x in chart["kept"] if x is not None] == pytest.approx(ev["probs_t"][:kept])
    assert [x for x in chart["cut"] if x is not None] == pytest.approx(ev["probs_t"][kept:])
    if ev["rank"] < len(ev["top_ids"]):
        assert chart["star"] == [chart["labels"][ev["rank"]]]
        assert f"drawn: {quote(ev['top_texts'][ev['rank']])} (" in state["caption"]
    assert f"keep {ev['n_kept']} token" in state["caption"] or f"keeps {ev['n_kept']} token" in state["caption"]


@pytest.mark.django_db(transaction=True)
def test_the_scrubber_moves_the_bar_chart_and_its_caption_through_the_run(live_server, stand_in, recorded_runs):
    steps = [e for e in recorded_runs["sampling"] if e["type"] == "sampling_step"]
    assert len(steps) == SMALL_PARAMS["sampling"]["max_new_tokens"]
    assert any(s["n_kept"] < len(s["top_ids"]) for s in steps)  # some step cuts inside the chart
    page = stand_in
    page.goto(f"{live_server.url}/demos/sampling/")
    page.locator(".ilab-demo .ilab-run").click()
    page.wait_for_function(DONE, timeout=30_000)
    assert timeline_state(page, "sampling")["step"] == len(steps) - 1  # a finished run shows its last step
    names = page.evaluate(CHART)["names"]
    assert names[:4] == ["before temperature", "after temperature, kept", "after temperature, cut", "what the draw used"]
    for i in (0, len(steps) // 2, len(steps) - 1, 1):
        assert_step(page, steps, i)
    text = page.locator(".ilab-demo [aria-label='Generated text']").inner_text()
    finished = recorded_runs["sampling"][-1]
    assert text.endswith(finished["text"])
    assert page.errors == [], page.errors


@pytest.mark.django_db(transaction=True)
def test_the_lesson_draws_its_reference_run_and_the_scrubber_moves_it(live_server, stand_in):
    from django.conf import settings

    load_course(settings.CONTENT_DIR)
    run = json.loads((settings.CONTENT_DIR / "runs" / "sampling.json").read_text())
    steps = [e for e in run["events"] if e["type"] == "sampling_step"]
    page = stand_in
    page.goto(f"{live_server.url}/modules/sampling/")
    page.wait_for_function("() => document.querySelector('.ilab-demo[data-demo=\"sampling\"]')?.dataset.referenceRun === 'shown'",
                           timeout=30_000)
    page.locator('.ilab-demo[data-demo="sampling"] .ilab-timeline').scroll_into_view_if_needed()
    state = scrub_to(page, "sampling", 4)  # the step the narration describes: the third candidate drawn
    assert state["steps"] == run["steps"] == len(steps)
    assert "drawn: ' woman' (number 3 in the ranking" in state["caption"]
    assert page.errors == [], page.errors
