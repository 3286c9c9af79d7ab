"""Narration that drives the picture, in Chromium: the kv-cache lesson's step markers move its demo's timeline
(replaying the reference run stored in the course content) as the narration reaches them; the student takes
over the scrubber, after which the narration no longer moves it, until they choose to follow again."""
from __future__ import annotations

import json

import pytest
from django.conf import settings

from stand_in import scrub_to, stand_in_page, timeline_state
from test_lesson_reading import attach_sentence_narration

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

DEMO = "kv-cache"


@pytest.fixture
def lesson_page(chromium):
    """A page whose demo socket a stand-in answers (the lesson's demo never needs a worker here)."""
    context, page, _server = stand_in_page(chromium, {}, viewport={"width": 1280, "height": 900})
    yield page
    context.close()


def speak_from(page, cue_id: str) -> None:
    """Move the narration into cue `cue_id` (paused: a seek runs the text track's cue change)."""
    page.evaluate("""(id) => {
        const audio = document.getElementById('narration-audio');
        audio.pause();
        audio.currentTime = audio.querySelector('track').track.cues.getCueById(id).startTime + 0.05;
        audio.dispatchEvent(new Event('timeupdate'));
    }""", cue_id)
    page.wait_for_function("(id) => document.querySelector('#lesson .is-speaking')?.dataset.cue === id", arg=cue_id)


def test_the_narration_moves_the_demo_timeline_until_the_student_takes_over(real_course, lesson_page):
    page = lesson_page
    attach_sentence_narration(DEMO, seconds_per_sentence=1.0)
    run = json.loads((settings.CONTENT_DIR / "runs" / f"{DEMO}.json").read_text(encoding="utf-8"))
    page.goto(f"{real_course}/modules/{DEMO}/")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
    page.wait_for_function("() => Number(document.getElementById('player').dataset.cues) > 0")
    # Until the student runs it, the demo replays the lesson's reference run, its timeline at the last step.
    page.wait_for_function("() => document.querySelector('.ilab-demo[data-demo=\"kv-cache\"]')?.dataset.referenceRun === 'shown'")
    state = timeline_state(page, DEMO)
    assert state["steps"] == run["steps"], "the stored step count is the demo timeline's"
    markers = page.evaluate("""() => [...document.querySelectorAll('#lesson .demo-cue')].map(
        (s) => ({cue: s.closest('[data-cue]').dataset.cue, step: Number(s.dataset.step)}))""")
    assert [m["step"] for m in markers] == [0, 1, 6, 11]
    note = page.locator(".narration-drives")
    assert "moves this timeline as it speaks" in note.inner_text()

    captions = []
    for marker in markers:
        speak_from(page, marker["cue"])
        page.wait_for_function("(s) => document.querySelector('.ilab-demo .ilab-timeline').dataset.step === String(s)",
                               arg=marker["step"])
        state = timeline_state(page, DEMO)
        # The demo's own caption for that step: prefill first, then one token per decode step.
        expected = "Prefill" if marker["step"] == 0 else f"Token {marker['step']} "
        assert state["caption"].startswith(expected), state["caption"]
        captions.append(state["caption"])
    assert len(set(captions)) == len(captions), "each cued step has its own caption"
    # The picture follows too: the token of that step is the one marked in the generated text.
    marked = page.evaluate("() => [...document.querySelectorAll('.ilab-kv__text .t')].findIndex((t) => t.classList.contains('cur'))")
    assert marked == markers[-1]["step"]

    # The student takes over the scrubber: the narration lets go, and says so.
    speak_from(page, markers[1]["cue"])
    page.wait_for_function("() => document.querySelector('.ilab-demo .ilab-timeline').dataset.step === '1'")
    scrub_to(page, DEMO, 3)
    page.wait_for_function("() => document.querySelector('.ilab-demo').dataset.narrationFollow === 'false'")
    assert "no longer moves it" in note.inner_text()
    follow = page.get_by_role("button", name="Follow the narration again")
    assert follow.is_visible()
    speak_from(page, markers[2]["cue"])
    page.wait_for_timeout(300)  # a few frames: a narration seek would have drawn by now
    assert timeline_state(page, DEMO)["step"] == 3
    speak_from(page, markers[3]["cue"])
    page.wait_for_timeout(300)
    assert timeline_state(page, DEMO)["step"] == 3

    # Following again jumps to where the narration is.
    follow.click()
    page.wait_for_function("() => document.querySelector('.ilab-demo .ilab-timeline').dataset.step === '11'")
    assert "moves this timeline as it speaks" in note.inner_text() and not follow.is_visible()
    assert not page.errors, page.errors
