"""The step timelines of the speculative and FlashAttention demos, on runs recorded from their real runners: scrub
to a middle step and the picture shows that step's data (a round's accepted and rejected guesses with the target's
correction, aligned with the text so far; the lit tile and its query tile's running max, sum and accumulator, see also test_timeline_flash_heads.py),
with its caption; the same on a share link."""
from __future__ import annotations

import pytest

from stand_in import SMALL_PARAMS, scrub_to, store_finished_run, timeline_state
from test_timeline_flash_heads import assert_tile, middle_rescaling_step

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

SPEC_TEXT = "[data-demo='speculative'] .ilab-spec__text"


def finish_run(page, base: str, demo: str) -> None:
    page.goto(f"{base}/demos/{demo}/")
    page.locator(".ilab-demo .ilab-run").click()
    page.wait_for_function(f"() => document.querySelector('[data-demo=\"{demo}\"]').dataset.state === 'done'",
                           timeout=30_000)


def open_shared(page, base: str, demo: str, events: list[dict]) -> None:
    """A finished run stored as a worker leaves it, opened through its share link."""
    run = store_finished_run(demo, events, SMALL_PARAMS[demo])
    page.goto(f"{base}/demos/runs/{run.share_id}/")
    page.wait_for_function(f"() => document.querySelector('[data-demo=\"{demo}\"]').dataset.state === 'shared'",
                           timeout=30_000)


def middle_round(rounds: list[dict]) -> int:
    """A round in the middle of the run, one with a rejection where there is one (the more telling picture)."""
    mid = len(rounds) // 2
    with_rejection = [i for i, r in enumerate(rounds) if "rejected" in r["outcome"]]
    return min(with_rejection, key=lambda i: abs(i - mid)) if with_rejection else mid


def round_shown(page) -> dict:
    return page.eval_on_selector(SPEC_TEXT, """(t) => ({
      marked: [...t.querySelectorAll('[data-outcome]')].map((s) => [s.dataset.outcome, s.textContent]),
      before: [...t.querySelectorAll('.done')].map((s) => s.textContent).join(''),
      prompt: t.querySelector('.p').textContent,
      table: t.closest('[data-demo]').querySelector('.ilab-spec__round caption').textContent,
    })""")


def check_round(page, events: list[dict]) -> None:
    rounds = [e for e in events if e["type"] == "spec_round"]
    assert len(rounds) >= 2, "the recorded run needs several rounds to scrub through"
    state = timeline_state(page, "speculative")
    assert state["steps"] == len(rounds) and state["step"] == len(rounds) - 1  # a finished run shows its last round
    i = middle_round(rounds)
    ev = rounds[i]
    state = scrub_to(page, "speculative", i)
    shown = round_shown(page)
    # The round's guesses with their outcomes, then the target's correction (or bonus token) where it was used.
    expected = [[o, t] for o, t in zip(ev["outcome"], ev["drafted_text"])]
    if len(ev["emitted"]) > ev["n_accepted"]:
        expected.append([ev["next_kind"], ev["next_text"]])
    assert shown["marked"] == expected
    # Aligned with the text: before the round stands exactly what the earlier rounds emitted.
    earlier = "".join(
        (r["drafted_text"][j] if j < r["n_accepted"] else r["next_text"]) for r in rounds[:i] for j in range(len(r["emitted"])))
    assert shown["before"] == earlier
    started = next(e for e in events if e["type"] == "run_started")
    assert shown["prompt"] == "".join(started["prompt_tokens"])
    assert shown["table"].startswith(f"Round {i + 1}:")
    n = len(ev["drafted"])
    assert state["caption"].startswith(f"Round {i + 1}: the draft proposed {n} token"), state["caption"]
    if "rejected" in ev["outcome"]:
        r = ev["outcome"].index("rejected")
        accepted = "none" if ev["n_accepted"] == 0 else str(ev["n_accepted"])
        assert f"the target accepted {accepted} and replaced the" in state["caption"]
        assert ev["next_text"].strip() in state["caption"] and ev["drafted_text"][r].strip() in state["caption"]
    assert state["caption"].endswith(f"{len(ev['emitted'])} token{'s' if len(ev['emitted']) != 1 else ''} for one target pass.") \
        or "(the run stopped there)" in state["caption"]


@pytest.mark.django_db(transaction=True)
def test_speculative_timeline_shows_each_rounds_verdict_in_the_text_live_and_shared(live_server, stand_in, recorded_runs):
    events = recorded_runs["speculative"]
    finish_run(stand_in, live_server.url, "speculative")
    check_round(stand_in, events)
    open_shared(stand_in, live_server.url, "speculative", events)
    check_round(stand_in, events)
    assert stand_in.errors == []


def check_tile(page, events: list[dict]) -> None:
    """The run's head: a middle tile that rescaled rows, the first and the last (test_timeline_flash_heads.py
    checks the picture of a step, and the other heads)."""
    walk = next(e for e in events if e["type"] == "flash_tile_walk")
    tiles = walk["tiles"]
    assert len(tiles) >= 3
    state = timeline_state(page, "flash-attention")
    assert state["steps"] == len(tiles)
    i = middle_rescaling_step(tiles)
    scrub_to(page, "flash-attention", i)
    assert_tile(page, walk, walk["head"], i)
    # The first step and the last: the walk starts at query tile 0's first key tile and ends on the last tile.
    state = scrub_to(page, "flash-attention", 0)
    assert_tile(page, walk, walk["head"], 0)
    assert "nothing to rescale" in state["caption"]
    state = scrub_to(page, "flash-attention", len(tiles) - 1)
    assert state["caption"].endswith("its output is acc / l.")


@pytest.mark.django_db(transaction=True)
def test_flash_attention_timeline_walks_the_tiles_with_running_statistics_live_and_shared(live_server, stand_in,
                                                                                          recorded_runs):
    events = recorded_runs["flash-attention"]
    finish_run(stand_in, live_server.url, "flash-attention")
    check_tile(stand_in, events)
    open_shared(stand_in, live_server.url, "flash-attention", events)
    check_tile(stand_in, events)
    assert stand_in.errors == []
