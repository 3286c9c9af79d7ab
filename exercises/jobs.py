"""Queueing a submission on the `cpu` workers and running it there (exercises/tasks.py is the Celery task).

The web side sends the task by name, so Daphne never imports the worker's side; the worker claims the row with one
conditional UPDATE (a redelivered message cannot run it twice), runs it in the sandbox and stores the graded
result, which the page polls for.
"""
from __future__ import annotations

import logging

from django.utils import timezone

from demos.runstate import CPU_QUEUE
from inferencelab.celery import app

from . import catalog
from .models import Submission
from .runner import evaluate
from .sandbox import SandboxUnavailable
from .signals import submission_graded

log = logging.getLogger(__name__)

RUN_TASK = "exercises.run_submission"


def enqueue(submission: Submission) -> None:
    """Send the submission to the `cpu` workers; raises what the broker client raises when it cannot be reached."""
    app.send_task(RUN_TASK, args=[str(submission.pk)], queue=CPU_QUEUE, retry=False)


def fail(submission_id, message: str) -> None:
    Submission.objects.filter(pk=submission_id, status__in=Submission.ACTIVE).update(
        status=Submission.Status.ERROR, results={"problem": message}, finished_at=timezone.now())


def run_submission(submission_id: str) -> str:
    """Claim, run and grade one queued submission; its final status ("skipped" if another took it)."""
    claimed = Submission.objects.filter(pk=submission_id, status=Submission.Status.QUEUED).update(
        status=Submission.Status.RUNNING, started_at=timezone.now())
    if not claimed:
        return "skipped"
    submission = Submission.objects.get(pk=submission_id)
    exercise = catalog.get(submission.exercise_id)
    if exercise is None:
        fail(submission_id, "This exercise no longer exists.")
        return Submission.Status.ERROR
    try:
        result = evaluate(exercise, submission.code)
    except SandboxUnavailable as exc:
        log.error("exercise sandbox unavailable: %s", exc)
        fail(submission_id, f"Your code was not run: {exc}")
        return Submission.Status.ERROR
    except Exception:  # noqa: BLE001 - the student sees that it failed; the log has why
        log.exception("grading submission %s failed", submission_id)
        fail(submission_id, "Your code could not be graded (an error on our side); try again.")
        return Submission.Status.ERROR
    Submission.objects.filter(pk=submission_id).update(
        status=Submission.Status.DONE, passed=result["passed"], results=result, finished_at=timezone.now())
    submission_graded.send(Submission, submission=Submission.objects.get(pk=submission_id))  # e.g. to an LMS
    return Submission.Status.DONE
