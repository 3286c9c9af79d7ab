"""Labs and exercises in the gradebook: a module's lab shows the student's submitted score and an embedded exercise
their best run (passed, or failed with the number of runs), in the page and the CSV; the student's page shows the
lab's table and answers as graded, and their exercise code."""
from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from classes.models import Cohort, Enrollment
from courseapp.models import Module
from exercises.models import Submission
from labs.models import Lab, LabAttempt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "labs"))
from lab_helpers import make_lab  # noqa: E402

EMBED = '<section class="exercise" id="exercise-roofline" data-exercise="roofline"></section>'
TABLE = {"metric": "decode_tokens_per_s",
         "metrics": {"decode_tokens_per_s": {"label": "Decode speed", "unit": "tokens/s"}},
         "rows": [{"label": "fp32", "runs": 3, "device": "cpu", "dtype": "float32", "engine_version": "abc123",
                   "stats": {"decode_tokens_per_s": {"median": 46.0, "min": 45.1, "max": 47.3, "n": 3}}},
                  {"label": "int4-g128", "runs": 3, "device": "cpu", "dtype": "float32", "engine_version": "abc123",
                   "stats": {"decode_tokens_per_s": {"median": 98.25, "min": 95.0, "max": 101.0, "n": 3}}}]}


@pytest.fixture
def cohort(course, teacher, student):
    cohort = Cohort.objects.create(name="Spring A")
    cohort.instructors.add(teacher)
    Enrollment.objects.create(cohort=cohort, user=student, source=Enrollment.Source.INVITE)
    return cohort


@pytest.fixture
def practice(course):
    """The intro module with a lab ("formats") and an embedded exercise (roofline)."""
    intro = Module.objects.get(slug="intro")
    Module.objects.filter(pk=intro.pk).update(html=intro.html + EMBED)
    Lab.objects.create(module=intro, key="formats", order=0, definition=make_lab())
    return intro


def _submit_lab(student, module, score: float) -> LabAttempt:
    return LabAttempt.objects.create(
        user=student, module=module, lab_key="formats", answers={"speedup": "2.1", "bytes": "int4", "why": "Bytes."},
        feedback={"questions": {"speedup": {"correct": True, "message": "Within your spread."},
                                "bytes": {"correct": False, "message": "int4-g128 reads fewer."}}, "table": TABLE},
        score=score, submitted_at=timezone.now())


def _run(student, code: str, passed: bool) -> Submission:
    return Submission.objects.create(exercise_id="roofline", owner=f"u:{student.pk}", user=student, code=code,
                                     status=Submission.Status.DONE, passed=passed, finished_at=timezone.now(),
                                     results={"passed": passed, "n_passed": 3 if passed else 1, "n_tests": 3})


def _cell(page: str, kind: str) -> str:
    start = page.index(f'<span class="practice-kind">{kind}</span>')
    return page[start:page.index("</li>", start)]


def test_the_gradebook_shows_a_labs_score_and_an_exercises_best_run(client, cohort, teacher, student, practice):
    client.force_login(teacher)
    book = reverse("classes:gradebook", args=[cohort.pk])
    page = client.get(book).content.decode()
    assert "not started" in _cell(page, "Lab") and "not tried" in _cell(page, "Exercise")

    _run(student, "def predict():\n    return 0\n", passed=False)
    _run(student, "def predict():\n    return 1\n", passed=False)
    _submit_lab(student, practice, 2 / 3)
    page = client.get(book).content.decode()
    assert "Formats: <strong>67%</strong>" in _cell(page, "Lab")
    assert "<strong>failed (2 runs)</strong>" in _cell(page, "Exercise")

    _run(student, "def predict():\n    return 42\n", passed=True)
    assert "<strong>passed</strong>" in _cell(client.get(book).content.decode(), "Exercise")

    rows = list(csv.reader(io.StringIO(client.get(reverse("classes:gradebook_csv", args=[cohort.pk]))
                                       .content.decode())))
    header, line = rows[0], rows[1]
    assert line[header.index("intro: lab formats (%)")] == "67"
    assert line[header.index("intro: exercise roofline")] == "passed"
    assert header.index("intro: lab formats (%)") == header.index("intro: best quiz score (of 2)") + 1


def test_the_student_page_shows_their_lab_table_answers_and_code(client, cohort, teacher, student, practice):
    _submit_lab(student, practice, 0.5)
    _run(student, "def predict():\n    return 'first try'\n", passed=False)
    _run(student, "def predict():\n    return 'it <works>'\n", passed=True)
    client.force_login(teacher)
    page = client.get(reverse("classes:student", args=[cohort.pk, student.pk])).content.decode()
    section = page[page.index('id="practice-heading"'):]
    assert "lab “Formats”" in section and "50%" in section
    assert "Decode speed (tokens/s)" in section and "98.2" in section and "95–101" in section
    assert "How many times faster?" in section and "2.1" in section and "Within your spread." in section
    assert "Exercise “" in section and "passed" in section and "2 graded runs" in section
    assert "return &#x27;it &lt;works&gt;&#x27;" in section  # the passing run's code, escaped
    assert "first try" not in section


def test_another_cohorts_teacher_sees_none_of_it(client, cohort, student, practice, other_teacher):
    _submit_lab(student, practice, 1.0)
    client.force_login(other_teacher)
    assert client.get(reverse("classes:student", args=[cohort.pk, student.pk])).status_code == 404
