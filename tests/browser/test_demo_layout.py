"""Every demo's picture and its step timeline seen together, as a student runs it on a laptop (1280 × 900) and on a
phone (390 × 844), against the stand-in socket (recorded runs, no worker): after Run the page brings the picture
into view with its scrubber docked under it; at the first, a middle and the last step both are on screen and the
picture is not hidden behind the timeline; a phone's scrubber spans the row (at least 240 px); the step buttons
draw SVG icons, not font glyphs a plain Linux machine lacks; and focus never falls to <body> when Run disables
itself (issue 39). One page per viewport serves all ten demos. In the narrated kv-cache lesson, "Follow along"
scrolls to the demo's picture when the voice describes it, not to the text below the demo."""
from __future__ import annotations

import pytest

from stand_in import scrub_to, stand_in_page, timeline_state
from test_lesson_reading import attach_sentence_narration

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.timeout(600)]

VIEWPORTS = {"laptop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}

# Each demo's main picture, the one its timeline redraws: found by what it is (its chart's label, its class),
# not by how the page lays it out.
PICTURES = {
    "attention": ".ilab-attn__bar-row",
    "kv-cache": ".ilab-kv__grid",
    "prefill-decode": '.ilab-calc__chart[aria-label^="Log-log roofline"]',
    "flash-attention": '.ilab-calc__chart[aria-label^="Grid: which query-by-key tiles"]',
    "serving-load": '.ilab-calc__chart[aria-label^="Gantt chart: one row per request"]',
    "speculative": ".ilab-spec__text",
    "paged-attention": '.ilab-calc__chart[aria-label^="Grid of physical KV blocks"]',
    "batching": '.ilab-calc__chart[aria-label^="Gantt chart per mode"]',
    "prefix-caching": '.ilab-calc__chart[aria-label^="Block strips"]',
    "quantization": '.ilab-calc__chart[aria-label^="Histogram of one block"]',
    "sampling": '.ilab-calc__chart[aria-label^="Horizontal bar chart: the 20 most likely next tokens"]',
    "tensor-parallel": '.ilab-calc__chart[aria-label^="Picture of this step: stacked bars"]',
    "attention-variants": '.ilab-calc__chart[aria-label^="Picture of this step"]',
    "gguf-inspect": '.ilab-calc__chart[aria-label^="Picture of this step: bytes per tensor"]',
    "token-cost": '.ilab-calc__chart[aria-label^="Cost per million tokens by batch size"]',
    "long-context": '.ilab-calc__chart[aria-label^="Perplexity against cache budget"]',
    "structured-output": '.ilab-calc__chart[aria-label^="Picture of this step: tokens the grammar allows"]',
    "serving-metrics": '.ilab-calc__chart[aria-label^="Picture of this step: one row per request"]',
}

# Where the picture and the timeline are on screen. `seen`: how much of the picture's height shows in the
# viewport, below a lesson's sticky audio player and not under the timeline (docked over the picture's lower part).
GEOMETRY = """([demo, picture]) => {
  const root = document.querySelector(`.ilab-demo[data-demo="${demo}"]`);
  const box = (node) => { const r = node.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height}; };
  const pic = box(root.querySelector(picture));
  const timeline = box(root.querySelector('.ilab-timeline'));
  const scrubber = box(root.querySelector('.ilab-timeline input[type=range]'));
  const player = document.getElementById('player'); // a lesson's audio player, sticky at the top
  const top = player ? Math.max(0, player.getBoundingClientRect().bottom) : 0;
  const under = timeline.top < pic.bottom && timeline.bottom > pic.top ? timeline.top : Infinity;
  const seen = Math.min(pic.bottom, innerHeight, under) - Math.max(pic.top, top);
  return {pic, timeline, scrubber, seen, top, vw: document.documentElement.clientWidth, vh: innerHeight,
          scrollWidth: document.scrollingElement.scrollWidth};
}"""

# Resolves once the page has not scrolled for 6 frames (a smooth scroll into view has finished).
SETTLED = """() => new Promise((resolve) => {
  let last = NaN, same = 0;
  const tick = () => { same = scrollY === last ? same + 1 : 0; last = scrollY; same >= 6 ? resolve() : requestAnimationFrame(tick); };
  tick();
})"""

# What had focus each time the demo changed state (running, done): recorded from before the Run click.
WATCH_FOCUS = """(demo) => {
  const root = document.querySelector(`.ilab-demo[data-demo="${demo}"]`);
  window.focusLog = [];
  new MutationObserver(() => {
    const a = document.activeElement;
    window.focusLog.push([root.dataset.state, a === document.body ? 'BODY' : a.className || a.tagName]);
  }).observe(root, {attributes: true, attributeFilter: ['data-state']});
}"""

ICONS = """(demo) => [...document.querySelectorAll(`.ilab-demo[data-demo="${demo}"] .ilab-timeline button`)].map((b) => ({
  name: b.getAttribute('aria-label'), text: b.textContent.trim(), svg: b.querySelectorAll('svg').length,
  hidden: b.querySelector('svg')?.getAttribute('aria-hidden'), width: b.querySelector('svg')?.getBoundingClientRect().width}))"""


def test_every_demo_names_its_picture_so_these_checks_cover_it():
    """A new demo is checked here as soon as it is registered: it must say which picture its timeline redraws."""
    from demos.registry import DEMOS

    assert set(PICTURES) == set(DEMOS), "a new demo: name its picture in PICTURES"


@pytest.fixture(scope="module")
def pages(chromium, recorded_runs):
    """One stand-in page per viewport, opened on first use and shared by the demos' tests."""
    opened: dict[str, tuple] = {}

    def page_for(viewport: str):
        if viewport not in opened:
            opened[viewport] = stand_in_page(chromium, recorded_runs, viewport=VIEWPORTS[viewport])
        return opened[viewport][1]

    yield page_for
    for context, _page, _server in opened.values():
        context.close()


def assert_together(page, demo: str, viewport: str, where: str) -> dict:
    page.evaluate(SETTLED)
    g = page.evaluate(GEOMETRY, [demo, PICTURES[demo]])
    s = g["scrubber"]
    context = (demo, viewport, where, g)
    assert g["top"] <= s["top"] and s["bottom"] <= g["vh"] and 0 <= s["left"] and s["right"] <= g["vw"], context
    # The picture in view above the docked timeline: all of a short one, at least 150 px of a tall one.
    assert g["seen"] >= min(150, g["pic"]["height"]) - 1 and g["pic"]["height"] > 40, context
    assert g["scrollWidth"] <= g["vw"], context
    if viewport == "phone":
        assert s["width"] >= 240, context
    return g


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("demo", list(PICTURES))
def test_after_run_the_picture_and_its_timeline_are_in_view_together_at_every_step(live_server, pages, demo,
                                                                                   viewport):
    page = pages(viewport)
    page.errors.clear()
    page.goto(f"{live_server.url}/demos/{demo}/")
    root = page.locator(f'.ilab-demo[data-demo="{demo}"]')
    root.locator(".ilab-run").wait_for()
    page.evaluate(WATCH_FOCUS, demo)
    root.locator(".ilab-run").click()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo[data-demo=\"{demo}\"]').dataset.state === 'done'",
                           timeout=30_000)
    # Run disabled itself: focus went to Stop, and back to Run once Stop disabled itself in turn.
    log = page.evaluate("() => window.focusLog")
    assert ["running", "ilab-stop"] in log and ["done", "ilab-run"] == log[-1], log
    assert page.evaluate("() => document.activeElement.className") == "ilab-run"

    steps = timeline_state(page, demo)["steps"]
    assert steps >= 2, (demo, steps)
    assert_together(page, demo, viewport, "after Run (the last step)")
    middle = steps // 2
    scrub_to(page, demo, middle)
    assert_together(page, demo, viewport, f"step {middle + 1} of {steps}")
    root.get_by_role("button", name="First step").click()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo[data-demo=\"{demo}\"] .ilab-timeline')"
                           ".dataset.step === '0'")
    assert_together(page, demo, viewport, "the first step")
    root.get_by_role("button", name="Last step").click()
    page.wait_for_function(f"() => document.querySelector('.ilab-demo[data-demo=\"{demo}\"] .ilab-timeline')"
                           f".dataset.step === '{steps - 1}'")
    assert_together(page, demo, viewport, "the last step")

    # Icons drawn as SVG (no glyph to miss in the font), the buttons still named for screen readers.
    icons = page.evaluate(ICONS, demo)
    assert [i["name"] for i in icons] == ["First step", "Previous step", "Play", "Next step", "Last step"], icons
    assert all(i["svg"] == 1 and i["text"] == "" and i["hidden"] == "true" and i["width"] >= 10 for i in icons), icons
    assert page.errors == [], page.errors


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_following_the_narration_shows_the_picture_it_moves_not_the_text_below_the_demo(real_course, chromium,
                                                                                         viewport):
    attach_sentence_narration("kv-cache", seconds_per_sentence=1.0)
    context, page, _server = stand_in_page(chromium, {}, viewport=VIEWPORTS[viewport])
    try:
        page.goto(f"{real_course}/modules/kv-cache/")
        page.wait_for_function("() => Number(document.getElementById('player').dataset.cues) > 0")
        page.wait_for_function("() => document.querySelector('.ilab-demo[data-demo=\"kv-cache\"]')"
                               "?.dataset.referenceRun === 'shown'", timeout=30_000)
        marker = page.evaluate("() => [...document.querySelectorAll('#lesson .demo-cue')].map("
                               "(s) => ({cue: s.closest('[data-cue]').dataset.cue, step: Number(s.dataset.step)})).at(-1)")
        page.evaluate("() => window.scrollTo(0, 0)")
        # Playing, "Follow along" on (the default): the narration reaches the marker's paragraph.
        page.evaluate("""async (id) => {
            const audio = document.getElementById('narration-audio');
            audio.muted = true;
            await audio.play();
            audio.currentTime = audio.querySelector('track').track.cues.getCueById(id).startTime + 0.05;
        }""", marker["cue"])
        page.wait_for_function("(id) => document.querySelector('#lesson .is-speaking')?.dataset.cue === id",
                               arg=marker["cue"])
        page.wait_for_function("(s) => document.querySelector('.ilab-demo .ilab-timeline').dataset.step === String(s)",
                               arg=marker["step"])
        page.evaluate("() => document.getElementById('narration-audio').pause()")
        assert_together(page, "kv-cache", viewport, f"narrated step {marker['step']}")
        assert page.errors == [], page.errors
    finally:
        context.close()

