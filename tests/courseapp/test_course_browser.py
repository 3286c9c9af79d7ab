"""The course in Chromium: narration highlight and click-to-seek, quiz feedback, author → student."""
from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest
from browser_login import log_in_instructor_in_browser
from django.core.files.uploadedfile import SimpleUploadedFile

from courseapp.loader import load_course
from courseapp.models import Module
from narration.jobs import attach_upload

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

CUE_SECONDS = 1.5


@pytest.fixture
def live_course(transactional_db, content_dir, live_server):
    load_course(content_dir)
    return live_server.url


def attach_test_narration(slug: str) -> list[str]:
    """A quiet tone with one WebVTT cue per narrated block (synthesis itself is tested elsewhere)."""
    module = Module.objects.get(slug=slug)
    ids = [cue["id"] for cue in module.cues]
    rate = 8000
    frames = int(rate * CUE_SECONDS * len(ids))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(b"\x10\x00\xf0\xff" * (frames // 2))
    lines = ["WEBVTT", ""]
    for index, cue_id in enumerate(ids):
        start, end = index * CUE_SECONDS, (index + 1) * CUE_SECONDS - 0.05
        lines += [cue_id, f"00:00:{start:06.3f} --> 00:00:{end:06.3f}", f"Cue {cue_id}", ""]
    attach_upload(module, SimpleUploadedFile("test.wav", buffer.getvalue()), ".wav",
                  SimpleUploadedFile("test.vtt", "\n".join(lines).encode()), frames / rate)
    return ids


def speaking(page) -> str | None:
    return page.evaluate("document.querySelector('#lesson .is-speaking')?.dataset.cue ?? null")


def test_narration_highlights_paragraphs_and_click_seeks(live_course, browser_page):
    ids = attach_test_narration("cache")
    page = browser_page
    page.goto(f"{live_course}/modules/cache/")
    player = page.get_by_role("region", name="Audio version of this page")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
    page.wait_for_function(f"() => Number(document.getElementById('player').dataset.cues) === {len(ids)}")

    player.get_by_role("button", name="Play").click()
    page.wait_for_function("() => document.querySelector('#lesson .is-speaking')?.dataset.cue === 'c1'", timeout=10_000)
    page.wait_for_function("() => document.querySelector('#lesson .is-speaking')?.dataset.cue === 'c2'", timeout=10_000)
    assert player.get_by_role("button", name="Pause").is_visible()

    # Click a later paragraph: playback jumps to its cue.
    page.locator('#lesson [data-cue="c4"]').click()
    time = page.evaluate("document.getElementById('narration-audio').currentTime")
    assert time >= 3 * CUE_SECONDS - 0.01, time
    assert speaking(page) == "c4"

    # Keyboard users: a "listen from here" button after each heading.
    listen = page.get_by_role("button", name="Listen from here: “What is cached”")
    listen.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.getElementById('narration-audio').currentTime") < CUE_SECONDS
    page.wait_for_function("() => document.querySelector('#lesson .is-speaking')?.dataset.cue === 'c1'")

    # Keyboard: K pauses while focus is in the player; speed select works.
    player.get_by_role("button", name="Pause").focus()
    page.keyboard.press("k")
    page.wait_for_function("() => document.getElementById('narration-audio').paused")
    player.get_by_role("button", name="More").click()  # the one-row player expands on demand
    player.get_by_label("Speed").select_option("1.5")
    assert page.evaluate("document.getElementById('narration-audio').playbackRate") == 1.5
    assert page.errors == []


def test_wrong_quiz_answer_shows_explanation(live_course, browser_page):
    page = browser_page
    page.goto(f"{live_course}/modules/intro/")
    quiz = page.get_by_role("region", name="Check yourself")
    quiz.get_by_label("Once, like training.").check()
    quiz.get_by_label("Decode is compute-bound at batch 1.").check()
    quiz.get_by_role("button", name="Check my answers").click()
    score = page.locator("#quiz-score")
    score.wait_for()
    assert "0/2" in score.inner_text() and "Aim for 2/2" in score.inner_text()
    assert page.get_by_text("Training happens once; inference happens for every request.").is_visible()
    assert page.get_by_text("The tensor cores mostly wait on memory.").is_visible()
    assert page.evaluate("document.activeElement.id") == "quiz-score"
    assert page.url.endswith("/modules/intro/")  # enhanced in place, no navigation

    # A second, correct attempt through the swapped-in form.
    page.get_by_label("For every request.").check()
    page.get_by_label("Decode is compute-bound at batch 1.").uncheck()
    page.get_by_label("Decode is memory-bound at batch 1.").check()
    page.get_by_label("Prefill is parallel over the prompt.").check()
    page.get_by_role("button", name="Check again").click()
    page.wait_for_function("() => document.querySelector('#quiz-score')?.textContent.includes('2/2')")
    assert page.errors == []


def test_quiz_without_javascript(live_course, chromium):
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{live_course}/modules/intro/")
        page.get_by_label("Once, like training.").check()
        page.get_by_role("button", name="Check my answers").click()
        assert "0/2" in page.locator("#quiz-score").inner_text()
        assert page.get_by_text("Training happens once; inference happens for every request.").is_visible()
    finally:
        context.close()


def test_author_edits_and_publishes_then_student_sees_it(live_course, browser_page, chromium):
    page = browser_page
    log_in_instructor_in_browser(page, live_course, "/author/")
    page.get_by_role("link", name="Batching").click()

    source = page.get_by_label("Lesson (Markdown)")
    page.locator(".md-gutter").wait_for(state="attached")  # the editor's script is running: typing is previewed
    source.fill(source.input_value() + "\nA brand-new paragraph about **iteration-level** scheduling.\n")
    page.locator("#preview strong", has_text="iteration-level").wait_for()  # live server-side preview
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved “Batching” (draft).").wait_for()

    student = chromium.new_context(bypass_csp=True)
    student_page = student.new_page()
    try:
        assert student_page.goto(f"{live_course}/modules/batching/").status == 404  # still a draft
        page.get_by_role("button", name="Publish").click()
        page.get_by_text("“Batching” is now published.").wait_for()
        assert student_page.goto(f"{live_course}/modules/batching/").status == 200
        assert student_page.get_by_text("A brand-new paragraph about iteration-level scheduling.").is_visible()
        student_page.goto(f"{live_course}/")
        assert student_page.get_by_role("link", name="Batching", exact=True).is_visible()
    finally:
        student.close()
    assert page.errors == []


def test_reading_position_is_remembered(transactional_db, content_dir, live_server, browser_page):
    sections = "\n\n".join(f"## Part {n}\n\n" + "\n\n".join(["Lorem ipsum dolor sit amet. " * 12] * 4)
                           for n in range(1, 6))
    (content_dir / "long.md").write_text("---\ntitle: Long read\nslug: long\ntrack: basics\norder: 9\ndraft: false\n"
                                         "---\n" + sections + "\n")
    load_course(content_dir)
    page = browser_page
    page.goto(f"{live_server.url}/modules/long/")
    assert page.get_by_text("Resume where you left off").count() == 0
    def saved(response):
        return response.url.endswith("/modules/long/place/") and "part-4" in (response.request.post_data or "")

    with page.expect_response(saved):
        page.evaluate("document.getElementById('part-4').scrollIntoView({block: 'start'})")
    page.goto(f"{live_server.url}/modules/long/")
    link = page.get_by_role("link", name="Resume where you left off: Part 4")
    link.click()
    assert page.url.endswith("#part-4")
    assert page.errors == []


def long_module(content_dir, slug: str = "long") -> None:
    sections = "\n\n".join(f"## Part {n}\n\n" + "\n\n".join(["Lorem ipsum dolor sit amet. " * 12] * 4)
                           for n in range(1, 6))
    (content_dir / f"{slug}.md").write_text(f"---\ntitle: Long read\nslug: {slug}\ntrack: basics\norder: 9\n"
                                            "draft: false\n---\n" + sections + "\n")
    load_course(content_dir)


def test_toc_jump_shows_the_heading_below_the_sticky_player_and_marks_it(transactional_db, content_dir, live_server,
                                                                          browser_page):
    long_module(content_dir)
    attach_test_narration("long")
    page = browser_page
    page.goto(f"{live_server.url}/modules/long/")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
    player_height = page.evaluate("document.getElementById('player').getBoundingClientRect().height")
    assert player_height <= 64, player_height  # one row until "More"
    for part in ("part-4", "part-2"):
        page.locator(f'nav.outline a[href="#{part}"]').click()
        page.wait_for_function(f"() => location.hash === '#{part}'")
        page.wait_for_timeout(300)
        player = page.evaluate("document.getElementById('player').getBoundingClientRect().bottom")
        heading = page.evaluate(f"document.getElementById('{part}').getBoundingClientRect().top")
        assert heading >= player - 1, (part, heading, player)  # not hidden under the player
        assert heading < 300
        page.wait_for_function(
            f"() => document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash === '#{part}'")
    # "More" expands the player on demand; "Less" folds it back to one row.
    page.get_by_role("button", name="More").click()
    assert page.get_by_label("Speed").is_visible()
    page.get_by_role("button", name="Less").click()
    assert not page.get_by_label("Speed").is_visible()
    assert page.errors == []


@pytest.fixture
def phone_page(chromium):
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, bypass_csp=True,
                                   device_scale_factor=2)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and "WebSocket" not in msg.text
            and page.errors.append(msg.text))
    yield page
    context.close()


PHONE_CHECK = """() => {
  const width = document.documentElement.clientWidth;
  const charts = [...document.querySelectorAll('.ilab-calc__chart, .ilab-kv__chart, .js-plotly-plot')];
  const outside = charts.map((c) => c.getBoundingClientRect())
    .filter((r) => r.width > 0 && (r.left < -1 || r.right > width + 1)).map((r) => [r.left, r.right]);
  const player = document.getElementById('player');
  return {scrollWidth: document.scrollingElement.scrollWidth, width, charts: charts.length, outside,
          player: player ? player.getBoundingClientRect().height : 0};
}"""


def test_phone_width_no_sideways_scroll_charts_inside_player_one_row(transactional_db, live_server, phone_page):
    """The real course at 390 × 844: every module with charts (calculators, embedded demos) and the index."""
    load_course(REPO_CONTENT)
    attach_test_narration("kv-cache")
    page = phone_page
    interactive = [m.slug for m in Module.objects.filter(draft=False) if m.has_interactive]
    assert len(interactive) >= 5
    page.goto(f"{live_server.url}/")
    assert page.evaluate(PHONE_CHECK)["scrollWidth"] <= 390
    for slug in interactive:
        page.goto(f"{live_server.url}/modules/{slug}/")
        page.wait_for_function("() => document.querySelectorAll('.ilab-calc__chart, .ilab-kv__chart').length > 0",
                               timeout=30_000)
        page.wait_for_timeout(400)  # responsive relayout
        found = page.evaluate(PHONE_CHECK)
        assert found["scrollWidth"] <= found["width"] == 390, (slug, found)
        assert found["charts"] and not found["outside"], (slug, found)
        if slug == "kv-cache":
            page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
            assert 0 < page.evaluate(PHONE_CHECK)["player"] <= 64
            # One row until asked: "More" (aria-expanded) shows the rest, "Less" folds it back.
            more = page.get_by_role("button", name="More")
            assert more.get_attribute("aria-expanded") == "false" and not page.get_by_label("Speed").is_visible()
            more.click()
            assert page.get_by_role("button", name="Less").get_attribute("aria-expanded") == "true"
            assert page.get_by_label("Speed").is_visible()
            assert page.get_by_text("Player options and keyboard shortcuts").is_visible()
            assert page.evaluate(PHONE_CHECK)["scrollWidth"] <= 390
            page.get_by_role("button", name="Less").click()
            assert 0 < page.evaluate(PHONE_CHECK)["player"] <= 64
    assert page.errors == [], page.errors


def test_author_fixes_an_error_on_its_numbered_line_previews_a_demo_and_publishes_after_the_diff(
        live_course, csp_page, chromium):
    """Under the site's CSP: the editor's line numbers mark the line an error names, the live preview mounts
    a real demo (not just its title), and a change to a published module goes live only after its diff."""
    page = csp_page
    log_in_instructor_in_browser(page, live_course, "/author/intro/")

    source = page.get_by_label("Lesson (Markdown)")
    page.locator(".md-gutter").wait_for(state="attached")  # the editor's script is running
    original = source.input_value()
    broken = "## Why it matters\n\nFirst.\n\n:::{callout} loud\nNot a callout kind.\n:::\n"
    source.fill(broken)
    page.locator(".md-gutter .is-error", has_text="5").wait_for()  # the live preview's error, on line 5
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Not saved: please fix the errors below.").wait_for()
    assert page.locator(".md-gutter .is-error").inner_text().endswith("5")
    assert page.locator(".md-gutter > div").count() == len(broken.split("\n"))  # as editors number them
    # Each number sits level with its line (lines soft-wrap: the gutter measures them).
    line_height = page.locator("#id_source").evaluate("t => parseFloat(getComputedStyle(t).lineHeight)")
    assert abs(page.locator(".md-gutter > div").first.bounding_box()["height"] - line_height) < 1
    page.locator(".field-errors").get_by_role("button", name="Go to line 5").click()
    selected = page.locator("#id_source").evaluate(
        "t => t.value.slice(t.selectionStart, t.selectionEnd)")
    assert selected == ":::{callout} loud"

    fixed = original + '\n:::{demo} kv-cache\n{"prompt": "Edited live", "max_new_tokens": 4}\n:::\n'
    page.get_by_label("Lesson (Markdown)").fill(fixed)
    page.locator("#preview .ilab-demo[data-mounted] button", has_text="Run").wait_for()  # mounted, not a title
    assert page.locator(".md-gutter .is-error").count() == 0

    page.get_by_role("button", name="Save").click()
    page.get_by_text("Students see this module now: check what changes").wait_for()
    assert page.locator(".live-change .diff-added", has_text=":::{demo} kv-cache").count() == 1
    assert "kv-cache" not in Module.objects.get(slug="intro").source  # nothing live before the author agrees
    page.get_by_role("button", name="Publish these changes").click()
    page.get_by_text("Saved “Introduction to inference”.").wait_for()
    assert Module.objects.get(slug="intro").source.endswith(":::\n")
    assert Module.objects.get(slug="intro").demos
    assert [e for e in page.errors if "WebSocket" not in e] == []


def test_a_lesson_term_links_to_the_glossary_with_its_definition_on_focus(live_course, csp_page):
    from courseapp.models import Track

    Module.objects.create(slug="glossary", title="Glossary", track=Track.objects.get(slug="basics"), order=9,
                          draft=False, source="x", html="<ul><li><strong>Inference</strong>: running a trained model."
                          "</li></ul>" + "<p>filler</p>" * 80 + "<ul><li><strong>Prefill</strong>: the prompt pass.</li></ul>")
    Module.objects.filter(slug="glossary").update(
        source="- **Inference**: running a trained model.\n- **Prefill**: the prompt pass.\n")
    page = csp_page
    page.goto(f"{live_course}/modules/intro/")
    term = page.locator("#lesson a.glossary-term").first
    term.wait_for()
    assert term.inner_text() == "Inference" and term.get_attribute("href") == "/modules/glossary/#term-inference"
    assert page.locator("#lesson a.glossary-term").count() == 1  # first mention only
    tip = page.locator("#" + term.get_attribute("aria-describedby"))
    assert not tip.is_visible()
    # Hovering shows the definition, inside the window; moving away hides it again.
    term.hover()
    assert tip.is_visible() and tip.inner_text() == "Inference: running a trained model."
    box, width = tip.bounding_box(), page.evaluate("document.documentElement.clientWidth")
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, (box, width)
    page.mouse.move(1, 1)
    assert not tip.is_visible()
    term.focus()
    assert tip.is_visible() and tip.inner_text() == "Inference: running a trained model."
    page.goto(f"{live_course}/modules/glossary/#term-prefill")
    entry = page.locator("li#term-prefill.is-target")
    entry.wait_for()
    assert entry.is_visible() and page.evaluate("window.scrollY") > 0  # brought into view below the fold
    assert page.errors == []


def test_narration_being_generated_shows_its_progress_then_the_player_without_a_reload(live_course, browser_page):
    from narration.models import Narration

    Narration.objects.create(module=Module.objects.get(slug="cache"), status=Narration.Status.RUNNING, progress=0.3)
    page = browser_page
    page.goto(f"{live_course}/modules/cache/")
    note = page.locator("#player")
    assert "being generated now (30% done). Narration is ready for 0 of 2 modules." in note.inner_text()
    assert page.locator("#player progress").evaluate("p => p.value") == pytest.approx(0.3)

    Narration.objects.filter(module__slug="cache").update(progress=0.6)
    page.wait_for_function("() => document.querySelector('#player').textContent.includes('60% done')", timeout=15_000)
    assert page.locator("#player progress").evaluate("p => p.value") == pytest.approx(0.6)

    attach_test_narration("cache")  # the worker finishes: the player takes the note's place, working
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'", timeout=15_000)
    player = page.get_by_role("region", name="Audio version of this page")
    assert player.get_by_role("button", name="Play").is_visible()
    assert page.get_by_role("button", name="Listen from here: “What is cached”").count() == 1
    assert page.url.endswith("/modules/cache/")  # no reload
    assert page.errors == []


GLOSSARY_TIPS_OUTSIDE = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const term of document.querySelectorAll('#lesson a.glossary-term')) {
    term.focus();
    const tip = document.getElementById(term.getAttribute('aria-describedby'));
    const r = tip.getBoundingClientRect();
    if (!r.width || r.left < -1 || r.right > width + 1 || document.scrollingElement.scrollWidth > width) {
      out.push([term.textContent, Math.round(r.left), Math.round(r.right), document.scrollingElement.scrollWidth]);
    }
    term.blur();
  }
  return out;
}"""


def test_glossary_definitions_stay_inside_a_phone_screen(transactional_db, live_server, phone_page):
    """At 390 px a tapped (focused) term's definition opens inside the screen wherever the term sits in its line,
    and never makes the page scroll sideways."""
    load_course(REPO_CONTENT)
    page = phone_page
    checked = 0
    for slug in ("kv-cache", "prefill-decode", "paged-attention", "speculative-decoding"):
        page.goto(f"{live_server.url}/modules/{slug}/")
        page.locator("#lesson a.glossary-term").first.wait_for(state="attached")
        checked += page.locator("#lesson a.glossary-term").count()
        assert page.locator("#lesson .glossary-tip .glossary-term").count() == 0, slug  # no term inside a definition
        assert page.evaluate(GLOSSARY_TIPS_OUTSIDE) == [], slug
    assert checked >= 10
    assert page.errors == [], page.errors


def test_toc_jump_on_a_phone_shows_the_heading_below_the_player_even_when_expanded(transactional_db, content_dir,
                                                                                    live_server, phone_page):
    """At 390 × 844 the outline's links land each heading below the sticky one-row player, and below the
    expanded player too (its height is what the scroll margin reads)."""
    long_module(content_dir)
    attach_test_narration("long")
    page = phone_page
    page.goto(f"{live_server.url}/modules/long/")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")

    def jump(part):
        link = page.locator(f'nav.outline a[href="#{part}"]')
        if not link.is_visible():  # the outline may fold away on a phone
            page.locator("nav.outline summary").first.click()
        link.click()
        page.wait_for_function(f"() => location.hash === '#{part}'")
        page.wait_for_timeout(300)
        top, player = page.evaluate("[...['top', 'bottom'].map((k) => document.getElementById('player')"
                                    ".getBoundingClientRect()[k])]")
        heading = page.evaluate(f"document.getElementById('{part}').getBoundingClientRect().top")
        assert top >= -1 and player > 0, (part, top, player)  # the player is still in view (sticky)
        assert player - 1 <= heading < 400, (part, heading, player)
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390

    jump("part-4")
    page.get_by_role("button", name="More").click()
    jump("part-2")
    jump("part-5")
    assert page.errors == [], page.errors


def test_the_outline_marks_the_section_being_read_while_scrolling(transactional_db, content_dir, live_server,
                                                                  browser_page):
    """Reading on without the outline (scrolling) moves its "you are here" mark to the section whose heading has
    passed the top of the window."""
    long_module(content_dir)
    page = browser_page
    page.goto(f"{live_server.url}/modules/long/")
    for part in ("part-3", "part-5", "part-1"):
        page.evaluate(f"window.scrollTo(0, document.getElementById('{part}').getBoundingClientRect().top"
                      " + window.scrollY - 10)")  # its heading just under the top
        page.wait_for_function(
            f"() => document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash === '#{part}'",
            timeout=5_000)
        assert page.locator('nav.outline a[aria-current="location"]').count() == 1
    assert page.errors == []


def test_the_outline_marks_the_section_under_the_player_as_the_learner_scrolls_on(transactional_db, content_dir,
                                                                                 live_server, browser_page):
    """Scrolling on a little at a time (a wheel), the mark moves to a section as soon as its heading comes up
    under the sticky player, not only once the heading has gone under the player (a section or two late)."""
    long_module(content_dir)
    attach_test_narration("long")
    page = browser_page
    page.goto(f"{live_server.url}/modules/long/")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
    page.mouse.move(640, 450)
    for part in ("part-2", "part-3", "part-4"):
        for _ in range(80):
            page.mouse.wheel(0, 60)
            page.wait_for_timeout(40)
            player, heading = page.evaluate(f"""[document.getElementById('player').getBoundingClientRect().bottom,
                                                document.getElementById('{part}').getBoundingClientRect().top]""")
            if heading < player + 120:
                break
        assert player <= heading < player + 120, (part, player, heading)  # in view, just under the player
        page.wait_for_timeout(200)
        marked = page.evaluate("document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash")
        assert marked == f"#{part}", (part, marked, heading)
    assert page.errors == []


def test_a_phone_shows_the_lesson_title_on_its_first_screen_with_the_outline_folded(transactional_db, live_server,
                                                                                  phone_page):
    """At 390 × 844 the lesson's title is on the first screen (it was ~580 px down, under the whole outline):
    the outline is one "On this page" line that opens on a tap."""
    load_course(REPO_CONTENT)
    page = phone_page
    for slug in ("quantization", "kv-cache", "overview"):
        page.goto(f"{live_server.url}/modules/{slug}/")
        title = page.evaluate("(() => { const r = document.getElementById('module-title').getBoundingClientRect();"
                              " return [r.top, r.bottom]; })()")
        assert 0 < title[0] and title[1] <= 844 * 0.6, (slug, title)
        links = page.locator("nav.outline a")
        assert not links.first.is_visible()
        page.locator("nav.outline summary").click()
        assert links.first.is_visible() and links.last.is_visible()
    assert page.errors == [], page.errors


def test_the_outline_marks_the_last_section_once_the_page_is_scrolled_to_its_end(transactional_db, live_server,
                                                                                 browser_page):
    """A short last section ("Sources") never reaches the top of the window: at the page's end it is the one
    being read, so the outline marks it."""
    load_course(REPO_CONTENT)
    page = browser_page
    for slug in ("kv-cache", "overview"):
        page.goto(f"{live_server.url}/modules/{slug}/")
        last = page.locator("nav.outline a").last.get_attribute("href")
        assert last == "#sources", (slug, last)
        page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
        page.wait_for_function(
            "() => document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash === '#sources'",
            timeout=5_000)
        # Back up a screen: the mark returns to the section whose heading passed the top.
        page.evaluate("window.scrollBy(0, -window.innerHeight)")
        page.wait_for_function(
            "() => document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash !== '#sources'",
            timeout=5_000)
    assert page.errors == []


def test_a_jump_to_a_short_section_near_the_end_marks_that_section(transactional_db, content_dir, live_server,
                                                                   browser_page):
    """Two short sections at the end: a jump to the first scrolls the page to its end, and the outline marks the
    section jumped to (in view), not the last one."""
    body = "\n\n".join(f"## Part {n}\n\n" + "\n\n".join(["Lorem ipsum dolor sit amet. " * 12] * 4) for n in (1, 2))
    (content_dir / "ends.md").write_text("---\ntitle: Short ends\nslug: ends\ntrack: basics\norder: 9\ndraft: false\n---\n"
                                         + body + "\n\n## Nearly done\n\nOne line.\n\n## Last words\n\nAnother line.\n")
    load_course(content_dir)
    page = browser_page
    page.goto(f"{live_server.url}/modules/ends/")
    page.locator('nav.outline a[href="#nearly-done"]').click()
    page.wait_for_function("() => location.hash === '#nearly-done'")
    at_end = page.evaluate("innerHeight + scrollY >= document.scrollingElement.scrollHeight - 2")
    assert at_end  # the jump could not bring the heading to the top
    page.wait_for_function(
        "() => document.querySelector('nav.outline a[aria-current=\"location\"]')?.hash === '#nearly-done'",
        timeout=5_000)
    page.wait_for_timeout(300)
    assert page.locator('nav.outline a[aria-current="location"]').get_attribute("href") == "#nearly-done"
    assert page.errors == []


def test_leaving_an_edited_page_warns_first_and_not_after_saving(live_course, browser_page):
    page = browser_page
    log_in_instructor_in_browser(page, live_course, "/author/batching/")
    source = page.get_by_label("Lesson (Markdown)")
    page.locator(".md-gutter").wait_for(state="attached")  # the editor's script is running
    dialogs: list[str] = []
    answer = {"leave": False}

    def on_dialog(dialog):
        dialogs.append(dialog.type)
        dialog.accept() if answer["leave"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    source.click()  # a user gesture, which a browser requires before it may ask anything on leaving
    page.keyboard.press("Control+End")
    page.keyboard.type("\nA sentence typed and not saved.")
    with page.expect_event("dialog", timeout=10_000):
        page.get_by_role("link", name="← All modules").click()
    assert dialogs == ["beforeunload"]
    assert page.url.endswith("/author/batching/")  # "stay on the page" keeps the text
    assert "A sentence typed and not saved." in source.input_value()

    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved “Batching” (draft).").wait_for()
    assert dialogs == ["beforeunload"]  # saving is not leaving unsaved
    source.click()
    page.get_by_role("link", name="← All modules").click()
    page.wait_for_url(f"{live_course}/author/")
    assert dialogs == ["beforeunload"]  # nothing unsaved: no question

    page.goto(f"{live_course}/author/batching/")
    page.locator(".md-gutter").wait_for(state="attached")
    source.click()
    page.keyboard.type("More.")
    answer["leave"] = True
    page.get_by_role("link", name="← All modules").click()
    page.wait_for_url(f"{live_course}/author/")  # "leave" leaves
    assert dialogs == ["beforeunload", "beforeunload"]
    assert "More." not in Module.objects.get(slug="batching").source


def test_a_published_modules_saved_change_waits_as_a_draft_across_leaving(live_course, browser_page, chromium):
    page = browser_page
    log_in_instructor_in_browser(page, live_course, "/author/intro/")
    source = page.get_by_label("Lesson (Markdown)")
    page.locator(".md-gutter").wait_for(state="attached")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))
    source.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\nA change students must not see yet.")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Students see this module now: check what changes").wait_for()
    source.click()
    page.get_by_role("link", name="← All modules").click()  # the change is stored: leaving asks nothing
    page.wait_for_url(f"{live_course}/author/")
    assert dialogs == []

    student = chromium.new_context(bypass_csp=True).new_page()
    student.goto(f"{live_course}/modules/intro/")
    assert student.get_by_text("A change students must not see yet.").count() == 0
    page.get_by_role("link", name="Unpublished changes").click()
    assert "A change students must not see yet." in page.get_by_label("Lesson (Markdown)").input_value()
    page.get_by_role("button", name="Publish these changes").click()
    page.get_by_text("Saved “Introduction to inference”.").wait_for()
    student.goto(f"{live_course}/modules/intro/")
    assert student.get_by_text("A change students must not see yet.").count() == 1
    student.context.close()
