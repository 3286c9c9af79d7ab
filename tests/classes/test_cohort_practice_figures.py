"""The class figures count a module's labs and exercises (classes/practice_stats.py): per lab the learners who
started and submitted it and their median score, per exercise those who had a graded run and passed it and the
median of their best runs; a cohort's page counts its enrolled students only, the module's page everyone; the
page and its CSV agree (read over HTTP as the cohort's teacher and as an author)."""
from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from classes_helpers import make_teacher
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from classes.models import Cohort, Enrollment
from courseapp.loader import load_course
from courseapp.models import Module
from exercises import catalog
from exercises.models import Submission
from labs.models import LabAttempt

pytestmark = pytest.mark.django_db
EXERCISE = "serving-metrics"
LAB = """
:::{lab} formats
{"demo": "quantization", "title": "Formats", "question": "What moves?", "repeats": 1,
 "metric": "decode_tokens_per_s", "params": {"prompt": "Hi", "max_new_tokens": 4},
 "configs": [{"id": "fp32", "label": "fp32", "params": {"format": "int8"}, "side": "fp32"},
             {"id": "int8", "label": "int8", "params": {"format": "int8"}}],
 "questions": [{"id": "speedup", "kind": "ratio", "of": "int8", "over": "fp32", "text": "How many times faster?"}]}
:::
"""


@pytest.fixture
def figures(content_dir):
    path = content_dir / "cache.md"
    path.write_text(path.read_text() + LAB + f"\n:::{{exercise}} {EXERCISE}\n:::\n")
    load_course(content_dir)
    module = Module.objects.get(slug="cache")
    teacher = make_teacher("teacher")
    cohort = Cohort.objects.create(name="Spring A")
    cohort.instructors.add(teacher)
    a, b, c, outsider = (User.objects.create_user(name) for name in ("ann", "bob", "cat", "outsider"))
    for student in (a, b, c):
        Enrollment.objects.create(cohort=cohort, user=student, source=Enrollment.Source.INVITE)
    now = timezone.now()
    for learner, score in ((a, 1.0), (b, 0.5), (c, None), (outsider, 0.0), ("a-visitor", 0.0)):
        owner = {"visitor": learner} if isinstance(learner, str) else {"user": learner}
        LabAttempt.objects.create(module=module, lab_key="formats", answers={"speedup": "2"}, score=score,
                                  submitted_at=None if score is None else now, **owner)
    runs = ((a, 2, "done", now), (a, 4, "done", now), (b, 1, "done", now), (b, 4, "done", now - timedelta(days=60)),
            (c, 4, "error", now), (outsider, 4, "done", now))
    for user, n_passed, status, finished in runs:
        Submission.objects.create(exercise_id=EXERCISE, owner=f"u:{user.pk}", user=user, code="...", status=status,
                                  passed=status == "done" and n_passed == 4, finished_at=finished,
                                  results={"n_passed": n_passed, "n_tests": 4} if status == "done" else {})
    return cohort, teacher


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csv_values(client: Client, url: str) -> dict:
    response = client.get(url)
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return {(section, key, subkey): value for section, key, subkey, value, _ in rows[1:]}


def table_row(html: str, header: str) -> list[str]:
    row = re.search(rf'<th scope="row">{re.escape(header)}</th>(.*?)</tr>', html, re.S)
    assert row, header
    return [cell.strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)]


def test_a_cohort_s_figures_count_its_students_labs_and_exercises(figures):
    cohort, teacher = figures
    teacher_client = signed_in(teacher)
    page = teacher_client.get(f"/classes/{cohort.pk}/modules/cache/figures/")
    assert page.status_code == 200
    html = page.content.decode()
    assert table_row(html, "Lab: Formats") == ["3", "2", "75.0 %"]  # ann 100 %, bob 50 %; cat only saved
    assert table_row(html, "Exercise: " + catalog.get(EXERCISE).title) == ["2", "1", "62.5 %"]  # ann's best 4/4 (passed), bob's 1/4 (his pass is out of range)
    got = csv_values(teacher_client, f"/classes/{cohort.pk}/modules/cache/figures.csv")
    assert (got["lab", "formats", "started"], got["lab", "formats", "submitted"]) == ("3", "2")
    assert got["lab", "formats", "median_score_percent"] == "75.0"
    assert (got["exercise", EXERCISE, "started"], got["exercise", EXERCISE, "passed"]) == ("2", "1")
    assert got["exercise", EXERCISE, "median_score_percent"] == "62.5"


def test_the_module_s_figures_count_everyone_who_did_them(figures):
    _, teacher = figures
    got = csv_values(signed_in(teacher), "/classes/modules/cache/class.csv")
    # + the outsider and the visitor (lab scores 100, 50, 0, 0: median 25) and the outsider's passed run
    assert (got["lab", "formats", "started"], got["lab", "formats", "submitted"]) == ("5", "4")
    assert got["lab", "formats", "median_score_percent"] == "25.0"
    assert (got["exercise", EXERCISE, "started"], got["exercise", EXERCISE, "passed"]) == ("3", "2")
    assert got["exercise", EXERCISE, "median_score_percent"] == "100.0"


def test_a_module_without_practice_says_so(figures):
    _, teacher = figures
    html = signed_in(teacher).get("/classes/modules/intro/").content.decode()
    assert "This lesson has no lab or exercise." in html
