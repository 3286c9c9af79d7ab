"""Authoring errors in plain words, at the line the author has to fix, numbered the same way everywhere:
the editor's preview, a zip import and the History diff all count the lesson's lines from 1 (the first line
after the front matter), and name front matter lines as such."""
from __future__ import annotations

import html
import io
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from authoring.archive import build_zip
from courseapp.models import Module

from authoring_helpers import editor_data, save_live

pytestmark = pytest.mark.django_db

JARGON = re.compile(r"<block|<scalar>|<stream|mapping start|expected <|found '<")

QUIZ_HEAD = ":::{quiz}\n- question: What runs for every request?\n  choices:\n"
# A quiz whose second choice is indented one space further than the first: PyYAML says
# "expected <block end>, but found '<block sequence start>'".
MISALIGNED_QUIZ = (QUIZ_HEAD + "  - text: Inference\n    correct: true\n    explanation: Yes.\n"
                   "   - text: Training\n    explanation: Once.\n:::\n")
# A choice line that lost its ':' — PyYAML reports it on the next line.
MISSING_COLON_QUIZ = (QUIZ_HEAD + "    - text: Inference\n      correct true\n      explanation: Yes.\n"
                      "    - text: Training\n      explanation: Once.\n:::\n")
# A demo whose closing ':::' is missing: the block runs on to the callout's ':::'.
UNCLOSED_DEMO = "## Start\n\n:::{demo} kv-cache\n{}\n\nSome text after the demo.\n\n:::{callout} note\nA note.\n:::\n"


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def preview_error(client, source: str) -> str:
    response = client.post(reverse("authoring:preview"), {"source": source})
    assert response.status_code == 422
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), start=1) if needle in line)


def import_page(client, files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    response = client.post(reverse("authoring:import"),
                           {"archive": SimpleUploadedFile("course.zip", buffer.getvalue(), "application/zip")})
    assert response.status_code == 400
    return html.unescape(response.content.decode())


def with_body(file_bytes: bytes, body: str) -> bytes:
    text = file_bytes.decode()
    closing = text.index("\n---\n", 4) + len("\n---\n")
    return (text[:closing] + body).encode()


@pytest.mark.parametrize("source, needle, words", [
    (MISALIGNED_QUIZ, "   - text: Training", "indented differently from the items above it"),
    (MISSING_COLON_QUIZ, "correct true", "is not 'key: value': add the ':'"),
])
def test_yaml_mistakes_are_said_plainly_at_their_own_line(author, source, needle, words):
    message = preview_error(author, source)
    assert f"Line {line_of(source, needle)}: quiz is not valid YAML: this " in message and words in message
    assert not JARGON.search(message), message


def test_a_missing_closing_fence_of_a_demo_is_named_not_reported_as_json(author):
    message = preview_error(author, UNCLOSED_DEMO)
    demo_line = line_of(UNCLOSED_DEMO, ":::{demo}")
    assert (f"Line {demo_line}: the ':::{{demo}} kv-cache' block opened on line {demo_line} has no closing ':::': "
            f"add a line ':::' after its props (after line {demo_line + 1})") in message
    assert "JSON" not in message


def test_the_editor_marks_the_same_line_the_preview_names(author):
    module = Module.objects.get(slug="intro")
    response = author.post(reverse("authoring:edit", args=["intro"]), editor_data(module, MISALIGNED_QUIZ))
    page = html.unescape(response.content.decode())
    line = line_of(MISALIGNED_QUIZ, "   - text: Training")
    assert f'data-error-line="{line}"' in page and f"Line {line}: quiz is not valid YAML" in page


def test_a_zip_error_in_the_lesson_has_the_editors_line_number(author):
    files = {name: data for name, data in zip_files().items()}
    files["intro.md"] = with_body(files["intro.md"], MISALIGNED_QUIZ)
    page = import_page(author, files)
    line = line_of(MISALIGNED_QUIZ, "   - text: Training")
    assert f"intro.md, lesson line {line}: quiz is not valid YAML: this '- ' item is indented" in page
    assert f"Line {line}:" in preview_error(author, MISALIGNED_QUIZ)  # the editor's own number for it


def test_a_zip_error_in_the_front_matter_is_at_its_line_not_the_next(author):
    files = zip_files()
    text = files["intro.md"].decode().replace("summary: 'Why inference matters: a short tour.'", "summary A short tour.")
    files["intro.md"] = text.encode()
    page = import_page(author, files)
    # The summary is the front matter's 7th line (file line 8); YAML itself points at the next line.
    assert "intro.md, front matter line 7: front matter is not valid YAML: this line is not 'key: value'" in page
    assert not JARGON.search(page)


def test_the_history_diff_numbers_lesson_lines_as_the_editor_does(author):
    module = Module.objects.get(slug="intro")
    source = module.source.replace("Training happens once.", "Training happens once per model.")
    save_live(author, "intro", editor_data(module, source))
    first = Module.objects.get(slug="intro").history.order_by("history_date", "history_id").first()
    page = author.get(reverse("authoring:diff", args=["intro"]), {"from": first.history_id, "to": "current"})
    line = line_of(source, "Training happens once per model.")
    rows = html.unescape(page.content.decode())
    assert re.search(rf'<tr class="diff-added"><td class="diff-no"></td><td class="diff-no">{line}</td>', rows)
    assert re.search(rf'<tr class="diff-removed"><td class="diff-no">{line}</td>', rows)
    assert f"Lines {line - 3}–{line + 3} → {line - 3}–{line + 3}" in rows


def test_a_front_matter_change_is_numbered_as_front_matter_in_the_diff(author):
    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source, title="A new title"))
    first = Module.objects.get(slug="intro").history.order_by("history_date", "history_id").first()
    rows = author.get(reverse("authoring:diff", args=["intro"]),
                      {"from": first.history_id, "to": "current"}).content.decode()
    assert re.search(r'<tr class="diff-added"><td class="diff-no"></td><td class="diff-no">fm 1</td>.*title: A new',
                     rows)


def zip_files() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(build_zip())) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def test_the_format_reference_lists_every_demo_and_calculator_with_its_props(author):
    from demos.catalog import DEMOS

    from courseapp.rendering import calculator_names

    page = html.unescape(author.get(reverse("authoring:reference")).content.decode())
    for name, spec in DEMOS.items():
        assert f"<code>:::{{demo}} {name}</code> · {spec.title}" in page
        for prop in spec.params:
            assert f'id="demo-{name}"' in page and f"<code>{prop}</code>" in page
    assert calculator_names()  # the course has calculators, and each is listed with the props it reads
    for name in calculator_names():
        assert f"<code>:::{{calculator}} {name}</code>" in page
    kv_size = page[page.index('id="calculator-kv-size"'):]
    assert all(f"<code>{prop}</code>" in kv_size for prop in ("model", "tokens", "batch", "precision"))
    # A demo's limits are the validator's: the prompt's token cap is shown as the spec resolves it.
    prompt = DEMOS["kv-cache"].params["prompt"].describe()
    assert f"at most {prompt['max_tokens']} tokens" in page
    # The editor's format help links to it.
    edit = author.get(reverse("authoring:edit", args=["intro"])).content.decode()
    assert reverse("authoring:reference") in edit
