"""Math ($…$, $$…$$) rendered to MathML on the server, and code highlighted by Pygments: on the student page and
in the authoring preview (the same renderer), with bad LaTeX an authoring error at its line, never a 500."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp.loader import load_course
from courseapp.models import Module
from courseapp.rendering import ContentError, render_markdown

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"

SOURCE = r"""## Step time $t_{\text{step}}$

A decode step takes $t = \frac{B}{W}$, where a GPU costs $5 or $10 an hour.

$$
\text{tokens per second} \le \frac{\text{bandwidth}}{\text{bytes per token}}
$$

```python
def ceiling(bandwidth, size):
    return bandwidth / size  # tokens per second
```
"""


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def assert_rendered(html: str) -> None:
    html = html.replace("\xa0", " ")  # \text{} keeps its spaces as no-break spaces
    assert '<math display="inline" xmlns="http://www.w3.org/1998/Math/MathML" alttext="t sub step">' in html
    assert '<div class="math-display" tabindex="0" data-cue="c3"><math display="block"' in html
    assert "<mfrac><mrow><mtext>bandwidth</mtext></mrow><mrow><mtext>bytes per token</mtext></mrow></mfrac>" in html
    assert "$$" not in html and "\\frac" not in html and "\\text" not in html
    assert "costs $5 or $10 an hour" in html  # money, not math
    assert '<pre class="highlight"><code class="language-python"><span class="k">def</span>' in html
    assert '<span class="c1"># tokens per second</span>' in html and "style=" not in html


def test_preview_renders_math_and_code(author):
    response = author.post(reverse("authoring:preview"), {"source": SOURCE})
    assert response.status_code == 200
    assert_rendered(response.content.decode())


def test_student_page_renders_math_and_code_and_narrates_math_as_words(client, course):
    intro = Module.objects.get(slug="intro")
    rendered = render_markdown(SOURCE)
    intro.source, intro.html, intro.cues = SOURCE, rendered.html, [c.as_dict() for c in rendered.cues]
    intro.save()
    html = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert_rendered(html)
    assert '<link rel="stylesheet" href="/static/css/highlight.css">' in html
    assert [c.text for c in rendered.cues] == [
        "Step time t sub step",
        "A decode step takes t equals B over W, where a GPU costs $5 or $10 an hour.",
        "tokens per second is at most bandwidth over bytes per token",
    ]


@pytest.mark.parametrize("latex, line, message", [
    (r"$\frac{a$", 5, "its braces { } are not balanced"),
    (r"$\fracc{a}{b}$", 5, r"unknown LaTeX command \fracc"),
    (r"$x^$", 5, "LaTeX it cannot read"),
    (r"$\left( x$", 5, "LaTeX it cannot read (extra left or missing right)"),
    (r"$\def\x{\x\x} \x$", 5, r"\def is not supported in lessons"),
    ("$$\n\\frac{1}{\n$$", 6, "its braces { } are not balanced"),
    ("$" + "{" * 500 + "x" + "}" * 500 + "$", 5, "its braces nest 500 levels deep; the limit is 40"),
    ("$" + "x+" * 1200 + "$", 5, "the formula is 2,400 characters long; the limit is 2,000"),
])
def test_bad_latex_is_an_error_at_its_line_in_preview_and_save(author, latex, line, message):
    if "\n" in latex:  # display math: the formula is on the line after `$$`
        source = f"## Title\n\nText\n\n{latex}\n"
    else:
        source = f"## Title\n\nFirst paragraph.\n\nText {latex} here.\n"
    preview = author.post(reverse("authoring:preview"), {"source": source})
    assert preview.status_code == 422
    assert f"Line {line}: math" in preview.content.decode()  # the formula's own line
    assert message in preview.content.decode().replace("&#x27;", "'")
    before = Module.objects.get(slug="intro").source
    saved = author.post(reverse("authoring:edit", args=["intro"]), {
        "title": "Introduction to inference", "short_title": "", "slug": "intro", "track": Module.objects.get(
            slug="intro").track.pk, "order": 1, "prerequisites": "", "summary": "S.", "source": source,
        "action": "save"})
    assert saved.status_code == 200 and "Not saved" in saved.content.decode()
    assert Module.objects.get(slug="intro").source == before


def test_math_cannot_smuggle_markup():
    html = render_markdown(r"Look: $\text{<script>alert(1)</script>} \href{javascript:alert(1)}{x} a<b$" + "\n").html
    assert "<script>" not in html and "javascript:" not in html and "href" not in html
    assert "<mtext>&lt;script&gt;alert(1)&lt;/script&gt;</mtext>" in html and "<mo>&lt;</mo>" in html


def test_math_in_a_quiz_and_its_errors_name_the_line():
    quiz = (":::{quiz}\n- question: What is $\\frac{1}{2}$ of $N^2$?\n  choices:\n"
            "    - text: $N^2/2$\n      correct: true\n      explanation: Half of $N^2$.\n"
            "    - text: $N$\n      explanation: No.\n:::\n")
    question = render_markdown(quiz).questions[0]
    assert "<mfrac>" in question.text_html and "<msup>" in question.choices[0].text_html
    with pytest.raises(ContentError) as error:
        render_markdown(quiz.replace("text: $N$", "text: $\\nope$"))
    assert error.value.line == 7 and "unknown LaTeX command \\nope" in error.value.message


@pytest.mark.django_db
def test_no_lesson_shows_latex_source(client):
    """Every module of the course: its page shows formulas as MathML, never `$$`, `\\frac` or `_{` as text."""
    load_course(REPO_CONTENT)
    with_math = 0
    for module in Module.objects.filter(draft=False):
        html = client.get(reverse("courseapp:module", args=[module.slug])).content.decode()
        lesson = re.search(r'<div[^>]*id="lesson".*?</article>', html, re.S)
        text = re.sub(r"<[^>]+>", "", lesson[0] if lesson else html)
        assert not any(mark in text for mark in ("$$", "\\frac", "\\text", "_{", "^{")), module.slug
        with_math += "<math " in html
    assert with_math >= 2  # prefill-decode and flash-attention write formulas in LaTeX


def test_dollar_signs_in_prose_are_not_math():
    html = render_markdown("A $ sign, and another $ here; it costs $5 or $10.\n").html
    assert "<math" not in html and "A $ sign, and another $ here; it costs $5 or $10." in html


def test_search_indexes_a_formula_as_its_words():
    from search.index import html_sections

    text = " ".join(body for _, _, body in html_sections(render_markdown(SOURCE).html))
    assert "takes t equals B over W" in text and "tokens per second is at most bandwidth over bytes per token" in text
    assert "t=BW" not in text.replace(" ", "")
