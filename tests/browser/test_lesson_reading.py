"""Lessons that render and read well, in Chromium under the site's CSP: math as MathML, highlighted code,
glossary definitions that close on Escape, and quiz feedback that never calls a half-right answer correct."""
from __future__ import annotations

import pytest

from courseapp.models import Question, QuizAttempt

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_math_and_code_render_on_the_server_under_the_csp(real_course, csp_page, csp_violations):
    page = csp_page
    page.goto(f"{real_course}/modules/prefill-decode/")
    formula = page.locator(".math-display math[display=block]").first
    formula.wait_for()
    box = formula.bounding_box()
    assert box["height"] > 30 and box["width"] > 100  # laid out as a two-level fraction, not a line of source
    assert page.locator("#lesson mfrac").count() >= 1
    assert "\\frac" not in page.locator("#lesson").inner_text() and "$$" not in page.locator("#lesson").inner_text()

    page.goto(f"{real_course}/modules/serving/")
    keyword = page.locator("pre.highlight code.language-python span.k").first
    keyword.wait_for()
    plain = page.locator("pre.highlight code.language-python span.n").first
    colour = keyword.evaluate("el => getComputedStyle(el).color")
    assert colour != plain.evaluate("el => getComputedStyle(el).color")  # the stylesheet coloured the tokens
    assert page.locator("pre.highlight [style]").count() == 0  # classes, no inline styles
    assert not csp_violations, csp_violations
    assert not page.errors, page.errors


def test_a_glossary_definition_closes_on_escape(real_course, csp_page):
    page = csp_page
    page.goto(f"{real_course}/modules/primer/")
    term = page.locator("a.glossary-term").first
    term.wait_for()
    tip = page.locator(f"#{term.get_attribute('aria-describedby')}")

    term.focus()  # keyboard: focus shows the definition
    assert tip.is_visible()
    page.keyboard.press("Escape")
    assert not tip.is_visible()
    assert page.evaluate("document.activeElement.classList.contains('glossary-term')")  # focus stayed
    page.keyboard.press("Shift+Tab")
    term.focus()
    assert tip.is_visible()  # back on the term: shown again

    term.blur()
    page.mouse.move(0, 0)
    term.hover()  # pointer: hover shows it, Escape hides it without moving the pointer
    assert tip.is_visible()
    page.keyboard.press("Escape")
    assert not tip.is_visible()

    token = page.locator('a.glossary-term[href="/modules/glossary/#term-token"]')
    assert token.count() == 1  # the new basic terms are linked in the lessons
    assert "Token:" in page.locator(f"#{token.get_attribute('aria-describedby')}").text_content()


def multi_select_question():
    """A real multiple-choice question (several right answers): its module, number and right choice texts."""
    for question in Question.objects.select_related("module").order_by("module__slug", "order"):
        right = [c.text for c in question.choices.all() if c.correct]
        if len(right) > 1 and not question.module.draft:
            return question.module.slug, question.order, right
    pytest.skip("no multiple-choice question in the course")


def test_quiz_feedback_in_the_browser(real_course, csp_page, csp_violations):
    slug, number, right = multi_select_question()
    page = csp_page
    page.goto(f"{real_course}/modules/{slug}/#quiz")
    page.locator("#quiz .quiz-form button[type=submit]").click()  # nothing chosen
    alert = page.locator("#quiz-score[role=alert]")
    alert.wait_for()
    assert "nothing was graded" in alert.inner_text()
    assert not QuizAttempt.objects.exists()

    for attempt in (1, 2):
        fieldset = page.locator(f"#question-{number}")
        fieldset.get_by_label(right[0], exact=True).check()
        page.locator("#quiz").evaluate("el => { el.dataset.answered = 'before' }")
        page.locator("#quiz .quiz-form button[type=submit]").click()
        page.locator("#quiz:not([data-answered]) #quiz-score[role=status]").wait_for()  # quiz.js swapped it in
        fieldset = page.locator(f"#question-{number}")
        feedback = fieldset.inner_text()
        assert "✓ Correct" not in feedback and "✗ Not yet right." in feedback
        assert f"You chose 1 of the {len(right)} right answers" in feedback
        missed = fieldset.locator(".choice.is-missed")
        if attempt == 1:
            assert missed.count() == 0 and "after another try the right answer is shown" in feedback
        else:
            assert missed.count() == len(right) - 1 and missed.first.is_visible()
            assert "The right answers are marked below." in feedback
    assert QuizAttempt.objects.count() == 2
    assert not csp_violations, csp_violations
    assert not page.errors, page.errors


def attach_sentence_narration(slug: str, seconds_per_sentence: float = 0.6):
    """A quiet WAV upload (stored as MP3) with one WebVTT cue per narrated block and a timestamp tag per
    sentence, as `narration.synthesize` writes them; returns the first cue with three or more sentences."""
    import io
    import wave

    from django.core.files.uploadedfile import SimpleUploadedFile

    from narration import synthesis as narration
    from courseapp.models import Module
    from narration.jobs import attach_upload

    module = Module.objects.get(slug=slug)
    timed, clock = [], 0.0
    for cue in module.cues:
        spoken = []
        for sentence in narration.sentences(cue["text"]):
            spoken.append((clock, sentence))
            clock += seconds_per_sentence
        timed.append(narration.TimedCue(cue["id"], spoken[0][0], clock - 0.05, cue["text"],
                                        tuple(spoken) if len(spoken) > 1 else ()))
    rate = 8000
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(b"\x10\x00\xf0\xff" * int(rate * clock / 2 + 1))
    attach_upload(module, SimpleUploadedFile("n.wav", buffer.getvalue()), ".wav",
                  SimpleUploadedFile("n.vtt", narration.write_vtt(timed).encode()), clock)
    return next(c for c in timed if len(c.sentences) >= 3 and "$" not in c.text)


def test_the_sentence_being_spoken_is_highlighted(real_course, browser_page):
    cue = attach_sentence_narration("prefill-decode")
    page = browser_page
    page.goto(f"{real_course}/modules/prefill-decode/")
    page.wait_for_function("() => document.getElementById('player').dataset.ready === 'true'")
    page.wait_for_function("() => Number(document.getElementById('player').dataset.cues) > 0")
    start = cue.sentences[1][0]
    page.evaluate(f"document.getElementById('narration-audio').currentTime = {start + 0.1}")
    page.get_by_role("region", name="Audio version of this page").get_by_role("button", name="Play").click()
    page.wait_for_function(f"() => document.querySelector('#lesson .is-speaking')?.dataset.cue === '{cue.id}'",
                           timeout=10_000)
    page.wait_for_function("() => Number(document.getElementById('player').dataset.currentSentence) >= 2",
                           timeout=10_000)
    marked, shown = page.evaluate("[[...CSS.highlights.get('ilab-sentence')][0].toString(), "
                                  "document.getElementById('player').dataset.currentSentence]")
    assert " ".join(marked.split()) == cue.sentences[int(shown) - 1][1]
    page.wait_for_function("() => Number(document.getElementById('player').dataset.currentSentence) >= 3",
                           timeout=10_000)  # and it moves on, sentence by sentence
    marked, shown = page.evaluate("[[...CSS.highlights.get('ilab-sentence')][0].toString(), "
                                  "document.getElementById('player').dataset.currentSentence]")
    assert " ".join(marked.split()) == cue.sentences[int(shown) - 1][1]
    assert not page.errors, page.errors


def test_glossary_terms_are_never_linked_inside_a_formula(real_course, csp_page):
    page = csp_page
    page.goto(f"{real_course}/modules/flash-attention/")
    page.locator("a.glossary-term").first.wait_for()
    assert page.locator("#lesson math").count() >= 3
    assert page.locator("#lesson math .glossary-wrap, #lesson math a").count() == 0
    assert page.locator('a.glossary-term[href="/modules/glossary/#term-softmax"]').count() == 1  # in the prose
