"""An API request is stored as a Run, but no page shows one: not a teacher's list of a student's demo runs, not a
share link (over HTTP)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from classes.gradebook import student_record
from classes.models import Cohort
from demos.models import Run
from openai_api.runner import API_DEMO

pytestmark = pytest.mark.django_db


def test_api_runs_are_neither_in_the_gradebook_nor_behind_a_share_link(client):
    student = User.objects.create_user("student")
    api = Run.objects.create(demo=API_DEMO, status=Run.Status.DONE, owner=f"u:{student.pk}", user=student,
                             params={"prompt_token_ids": [1, 2]})
    demo = Run.objects.create(demo="kv-cache", status=Run.Status.DONE, owner=f"u:{student.pk}", user=student)
    record = student_record(Cohort.objects.create(name="Section A"), student)
    assert [run.pk for run in record.runs] == [demo.pk]
    assert client.get(f"/demos/runs/{api.share_id}/").status_code == 404
    assert client.get(f"/demos/runs/{demo.share_id}/").status_code == 200
