"""The `cpu` workers' exercise task (autodiscovered by inferencelab/celery.py; sent by name by exercises.jobs)."""
from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from .jobs import RUN_TASK, run_submission


# acks_late off (the project's default is on): a message redelivered after a worker died would find its row
# `running` and be skipped anyway, and the page has long since said the run was lost (exercises/views.py).
@shared_task(name=RUN_TASK, ignore_result=True, acks_late=False)
def run_exercise_submission(submission_id: str) -> str:
    close_old_connections()
    try:
        return run_submission(submission_id)
    finally:
        close_old_connections()
