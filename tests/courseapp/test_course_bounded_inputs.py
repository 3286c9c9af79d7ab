"""Tiny inputs that cost huge work or ended in a 500, each through the real view: a clear 4xx (or authoring
error at its line), bounded time, and nothing already stored lost.

Every request is timed with `time.process_time` (this process runs the view); the bound asserted is generous
(a loaded CI machine), the figure for a report is printed with `-s`.
"""
from __future__ import annotations

import html
import io
import random
import re
import struct
import time
import wave
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from authoring.archive import import_zip
from authoring.diffs import DiffBudget, diff_rows, matching_blocks
from courseapp.loader import CourseLoadError
from courseapp.models import Module, ModuleProgress, QuizAttempt, Track
from narration.models import Narration

pytestmark = pytest.mark.django_db

CPU_BOUND_S = 3.0  # the goal is ≤ 1 s; the assertion leaves room for a busy test machine
VTT = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\nWhy it matters\n"
LONG_NUMBER = "9" * 5000  # past Python's 4,300-digit int() limit

ALIAS_BOMB = """- question: Which?
  choices:
    - text: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
      correct: true
    - text: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    - text: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    - text: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    - text: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    - text: [*e,*e,*e,*e,*e,*e,*e,*e,*e]
"""
REUSED_MAPPING = """- question: Which?
  choices:
    - &same {text: "Yes", correct: true}
    - *same
"""


def timed(request):
    """(response, CPU seconds) of one request made by `request()`; streamed bodies are read inside the timing."""
    started = time.process_time()
    response = request()
    if response.streaming:
        response.body = b"".join(response.streaming_content)
    cpu = time.process_time() - started
    print(f"\n  {cpu * 1000:.0f} ms CPU")
    assert cpu < CPU_BOUND_S
    return response


def text_of(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def edit_data(module: Module, source: str) -> dict:
    return {"title": module.title, "short_title": module.short_title, "slug": module.slug, "track": module.track_id,
            "order": module.order, "prerequisites": ", ".join(module.prerequisites), "summary": module.summary,
            "source": source, "action": "save"}


def quiz_lesson(yaml_text: str) -> str:
    return "## Why it matters\n\nText.\n\n:::{quiz}\n" + yaml_text + ":::\n"


# --- YAML: no anchors or aliases, bounded nesting and numbers ---------------------------------------------------


def test_an_alias_bomb_in_the_preview_is_an_error_at_its_line(author):
    response = timed(lambda: author.post(reverse("authoring:preview"), {"source": quiz_lesson(ALIAS_BOMB)}))
    assert response.status_code == 422 and len(response.content) < 10_000
    assert "Line 8: quiz is not valid YAML: anchors (&name) and aliases (*name) are not allowed" in text_of(response)


def test_an_alias_bomb_is_not_saved_and_the_lesson_keeps_its_text(author):
    intro = Module.objects.get(slug="intro")
    before = (intro.source, intro.html, list(intro.questions.values_list("text", flat=True)))
    response = timed(lambda: author.post(reverse("authoring:edit", args=["intro"]),
                                         edit_data(intro, quiz_lesson(ALIAS_BOMB))))
    assert response.status_code == 200 and "Not saved" in text_of(response)
    assert "aliases (*name) are not allowed" in text_of(response)
    intro.refresh_from_db()
    assert (intro.source, intro.html, list(intro.questions.values_list("text", flat=True))) == before


@pytest.mark.parametrize("order", ["9" * 19, LONG_NUMBER, "-99999999999"])
def test_an_order_no_database_or_content_file_holds_is_refused_and_nothing_saved(author, order):
    intro = Module.objects.get(slug="intro")
    response = timed(lambda: author.post(reverse("authoring:edit", args=["intro"]),
                                         {**edit_data(intro, intro.source + "\nMore.\n"), "order": order}))
    assert response.status_code == 200 and "Not saved" in text_of(response)
    assert Module.objects.get(slug="intro").source == intro.source


@pytest.mark.parametrize("quiz, message", [
    (REUSED_MAPPING, "Line 8: quiz is not valid YAML: anchors (&name) and aliases (*name) are not allowed"),
    ("- question: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 32 levels deep"),
    ("- question: Which?\n  choices: " + LONG_NUMBER + "\n", "is too long: at most 18 digits"),
    ("- question: " + "Why? " * 25_000 + "\n", "this YAML is 125,013 characters long; at most 100,000 are read"),
])
def test_quiz_yaml_that_would_amplify_or_crash_is_a_clear_error(author, quiz, message):
    response = timed(lambda: author.post(reverse("authoring:preview"), {"source": quiz_lesson(quiz)}))
    assert response.status_code == 422 and message in text_of(response)


# --- Demo props: bounded nesting and numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("props, message", [
    ('{"prompt": ' + "[" * 5000 + "]" * 5000 + "}", "Line 4: {demo} kv-cache: props nest more than 32 levels deep"),
    ('{"max_new_tokens": ' + LONG_NUMBER + "}", "Line 4: {demo} kv-cache: props: the number 99999999999999999999…"),
])
def test_demo_props_too_deep_or_too_long_are_a_clear_error(author, props, message):
    source = "## Demo\n\n:::{demo} kv-cache\n" + props + "\n:::\n"
    response = timed(lambda: author.post(reverse("authoring:preview"), {"source": source}))
    assert response.status_code == 422 and message in text_of(response)


# --- Diffs: bounded work, a message when they are not exact -----------------------------------------------------


def adversarial_revisions(author) -> list[int]:
    """Two 4–8 KB drafts of repeated lines that cost difflib minutes; returns revision ids, oldest first."""
    batching = Module.objects.get(slug="batching")  # a draft: saved without a live diff to confirm
    url = reverse("authoring:edit", args=["batching"])
    for source in ("x\n" * 2000, "x\ny\n" * 2000):
        assert author.post(url, edit_data(batching, source)).status_code == 302
    return list(batching.history.order_by("history_date", "history_id").values_list("history_id", flat=True))


def test_history_and_diff_of_repetitive_drafts_answer_quickly(author):
    ids = adversarial_revisions(author)
    history = timed(lambda: author.get(reverse("authoring:history", args=["batching"])))
    assert history.status_code == 200 and len(ids) == 3
    diff = timed(lambda: author.get(reverse("authoring:diff", args=["batching"]),
                                    {"from": ids[1], "to": "current"}))
    page = text_of(diff)
    assert diff.status_code == 200 and "too repetitive to compare line by line" in page
    assert re.search(r"\(\+\d{4} / −\d{4} lines\)", page)  # all counted; the table stops at 5,000 rows, and says so
    assert page.count("<tr class=") == 5001 and re.search(r"\d+ more rows of this comparison are not shown", page)


def test_a_version_too_long_to_compare_says_so(author, monkeypatch):
    monkeypatch.setattr("authoring.diffs.MAX_DIFF_LINES", 100)
    ids = adversarial_revisions(author)
    diff = timed(lambda: author.get(reverse("authoring:diff", args=["batching"]), {"from": ids[0]}))
    assert diff.status_code == 200
    assert "too long to compare line by line (10 and 4009 lines; the limit is 100)" in text_of(diff)
    history = text_of(author.get(reverse("authoring:history", args=["batching"])))
    assert "too long to compare" in history


@pytest.mark.parametrize("query", [{"from": LONG_NUMBER}, {"from": "1", "to": LONG_NUMBER},
                                   {"from": "9" * 19}, {"from": "٣"}])
def test_a_revision_id_of_thousands_of_digits_is_a_404(author, query):
    response = timed(lambda: author.get(reverse("authoring:diff", args=["intro"]), query))
    assert response.status_code == 404


def test_restoring_a_revision_id_beyond_any_integer_is_a_404(author):
    url = reverse("authoring:restore", args=["intro", 1]).replace("/1/", f"/{'9' * 30}/")
    assert timed(lambda: author.post(url)).status_code == 404


def test_diffs_of_real_edits_are_exact():
    """The bounded matcher finds the same changes as difflib on an ordinary edit of a lesson."""
    lines = [f"Paragraph {n} about inference." if n % 3 else "" for n in range(300)]
    new = lines[:40] + ["An inserted line."] + lines[40:120] + lines[125:] + ["The end."]
    rows = diff_rows("\n".join(lines), "\n".join(new))
    assert [r.text for r in rows if r.kind == "added"] == ["An inserted line.", "The end."]
    assert [r.text for r in rows if r.kind == "removed"] == lines[120:125]
    assert diff_rows("same\n", "same\n") == []


def test_matching_blocks_are_valid_whatever_the_budget():
    rng = random.Random(23)
    for units in (0, 50, 10**6):
        for _ in range(300):
            a = [rng.choice("abcd") for _ in range(rng.randint(0, 40))]
            b = [rng.choice("abcd") for _ in range(rng.randint(0, 40))]
            blocks, _exact = matching_blocks(a, b, DiffBudget(units))
            i0 = j0 = 0
            for i, j, size in blocks[:-1]:
                assert i >= i0 and j >= j0 and size > 0 and a[i:i + size] == b[j:j + size]
                i0, j0 = i + size, j + size
            assert blocks[-1] == (len(a), len(b), 0)


# --- Numbers from anonymous requests -----------------------------------------------------------------------------


def wav_bytes(seconds: float = 0.5, rate: int = 8000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(b"\x01\x00" * int(rate * seconds))
    return buffer.getvalue()


def upload_narration(client, audio: bytes, **extra):
    return client.post(reverse("authoring:upload", args=["intro"]), {
        "audio": SimpleUploadedFile("talk.wav", audio), "vtt": SimpleUploadedFile("talk.vtt", VTT), **extra})


@pytest.fixture
def narration_url(client, course, instructor) -> str:
    client.force_login(instructor)
    assert upload_narration(client, wav_bytes()).status_code == 302
    client.logout()
    return Narration.objects.get(module__slug="intro").audio_url


@pytest.mark.parametrize("header, status, first_byte", [
    (f"bytes={'4' * 5000}-", 416, None),  # a start past any file
    (f"bytes={'4' * 5000}-{'5' * 5000}", 416, None),
    (f"bytes=0-{'4' * 5000}", 206, 0),  # an end past any file: clamped, as RFC 9110 says
    (f"bytes=-{'4' * 5000}", 206, 0),  # a suffix longer than the file: from its start
])
def test_a_range_of_thousands_of_digits_is_answered_not_a_500(client, narration_url, header, status, first_byte):
    response = timed(lambda: client.get(narration_url, HTTP_RANGE=header))
    assert response.status_code == status
    if status == 416:
        assert response["Content-Range"].startswith("bytes */")
    else:
        assert response["Content-Range"].startswith(f"bytes {first_byte}-")


@pytest.mark.parametrize("answer", [LONG_NUMBER, "²", "1" * 19])
def test_a_quiz_answer_of_thousands_of_digits_is_a_400_with_a_message(client, course, answer):
    page = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    seed = re.search(r'name="quiz_seed" value="([^"]+)"', page).group(1)
    field = Module.objects.get(slug="intro").questions.first().field_name
    response = timed(lambda: client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed, field: answer}))
    assert response.status_code == 400
    assert f"“{answer[:20]}" in text_of(response) and "is not one of its choices" in text_of(response)
    assert not QuizAttempt.objects.exists() and not ModuleProgress.objects.filter(completed_at__isnull=False).exists()


# --- Zip imports ---------------------------------------------------------------------------------------------------


def course_state() -> dict:
    return {
        "tracks": list(Track.objects.order_by("slug").values_list("slug", "title", "order", "summary")),
        "modules": list(Module.objects.order_by("slug").values_list("slug", "title", "source", "html", "draft")),
        "quiz": [(q.module.slug, q.order, q.text, [(c.text, c.correct) for c in q.choices.all()])
                 for q in Module.objects.get(slug="intro").questions.select_related("module")],
    }


def course_zip(course, **changes: bytes) -> bytes:
    """The fixture course as a zip, with some files replaced."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(course.iterdir()):
            zf.writestr(path.name, changes.pop(path.name, path.read_bytes()))
        for name, data in changes.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def intro_with(course, body_tail: str) -> bytes:
    text = (course / "intro.md").read_text()
    return (text[:text.index(":::{quiz}")] + body_tail).encode()


@pytest.mark.parametrize("change, message", [
    (lambda c: {"tracks.yaml": "- slug: basics\n  title: Bäsics\n  order: 1\n".encode("latin-1")},
     "tracks.yaml:2: the file is not UTF-8 text (invalid continuation byte at byte 25): save it as UTF-8"),
    (lambda c: {"intro.md": (c / "intro.md").read_text().replace("Why", "Whý").encode("latin-1")},
     "intro.md, front matter line 7: the file is not UTF-8 text"),
    (lambda c: {"intro.md": intro_with(c, ":::{quiz}\n" + REUSED_MAPPING + ":::\n")},
     "intro.md, lesson line 10: quiz is not valid YAML: anchors (&name) and aliases (*name) are not allowed"),
    (lambda c: {"intro.md": intro_with(c, ":::{demo} kv-cache\n{\"prompt\": " + "[" * 5000 + "]" * 5000 + "}\n:::\n")},
     "intro.md, lesson line 8: {demo} kv-cache: props nest more than 32 levels deep"),
    (lambda c: {"tracks.yaml": b"- &t {slug: basics, title: Basics, order: 1}\n- *t\n"},
     "tracks.yaml:1: not valid YAML: anchors (&name) and aliases (*name) are not allowed"),
    (lambda c: {"intro.md": (c / "intro.md").read_text().replace("order: 1", f"order: {LONG_NUMBER}").encode()},
     "intro.md, front matter line 5: front matter is not valid YAML: the number 99999999999999999999… is too long"),
    (lambda c: {"tracks.yaml": b"- slug: basics\n  title: Basics\n  order: -1\n"},  # was a database CHECK failure
     "tracks.yaml:1: track 'basics': 'order' must be a whole number from 0 to 2147483647"),
    (lambda c: {"intro.md": (c / "intro.md").read_text().replace("order: 1", "order: 99999999999").encode()},
     "intro.md, front matter line 5: 'order' must be between -2147483647 and 2147483647, got 99999999999"),
])
def test_a_bad_zip_is_refused_naming_file_and_line_and_changes_nothing(author, course, change, message):
    before = course_state()
    response = timed(lambda: author.post(reverse("authoring:import"), {
        "archive": SimpleUploadedFile("course.zip", course_zip(course, **change(course)), "application/zip")}))
    assert response.status_code == 400 and message in text_of(response)
    assert "Not imported: nothing was changed" in text_of(response)
    assert course_state() == before


def test_import_errors_from_the_loader_are_content_errors(course):
    with pytest.raises(CourseLoadError, match="not UTF-8"):
        import_zip(io.BytesIO(course_zip(course, **{"tracks.yaml": b"- slug: caf\xe9\n"})))


# --- WAV headers -----------------------------------------------------------------------------------------------


def patched_wav(**fields) -> bytes:
    """A valid WAV with fields of its header overwritten: rate, channels, frame_bytes, data_size."""
    data = bytearray(wav_bytes())
    offsets = {"channels": (22, "<H"), "rate": (24, "<I"), "frame_bytes": (32, "<H"), "data_size": (40, "<I")}
    for name, value in fields.items():
        offset, layout = offsets[name]
        struct.pack_into(layout, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize("fields, message", [
    ({"rate": 0}, "it says a sample rate of 0 Hz"),
    ({"channels": 0}, "it says 0 channels"),
    ({"frame_bytes": 0}, "it says each sample takes 0 bytes"),
    ({"data_size": 0xFFFFFFF0}, "it says 4294967280 bytes of audio, but the file holds 8000 after the header"),
    ({"rate": 4_000_000_000}, "it says a sample rate of 4000000000 Hz"),
])
def test_a_wav_with_an_absurd_header_is_a_400_and_the_narration_is_kept(author, fields, message):
    assert upload_narration(author, wav_bytes()).status_code == 302
    before = Narration.objects.filter(module__slug="intro").values("audio", "vtt", "duration").get()
    response = timed(lambda: upload_narration(author, patched_wav(**fields), replace="on"))
    assert response.status_code == 400
    assert f"This WAV file's header is damaged: {message}" in text_of(response)
    assert Narration.objects.filter(module__slug="intro").values("audio", "vtt", "duration").get() == before


def test_a_wav_upload_takes_its_duration_from_the_checked_header(author):
    assert upload_narration(author, wav_bytes(seconds=2.5)).status_code == 302
    assert Narration.objects.get(module__slug="intro").duration == pytest.approx(2.5)


@pytest.mark.parametrize("hours", ["9" * 5000, "9" * 400, "٣"])
def test_cues_with_thousands_of_digits_of_hours_are_a_400_naming_the_line(author, hours):
    vtt = f"WEBVTT\n\nc1\n{hours}:00:00.000 --> {hours}:00:01.000\nWhy it matters\n".encode()
    response = timed(lambda: author.post(reverse("authoring:upload", args=["intro"]), {
        "audio": SimpleUploadedFile("talk.wav", wav_bytes()), "vtt": SimpleUploadedFile("talk.vtt", vtt)}))
    assert response.status_code == 400
    assert "Not a valid WebVTT file: line 4: expected 'HH:MM:SS.mmm --> HH:MM:SS.mmm'" in text_of(response)
    assert not Narration.objects.filter(module__slug="intro").exists()
