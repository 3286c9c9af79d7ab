"""Labs and exercises of a module launched from an LMS send their scores the way its quiz does (lti/scores.py: a
job on the `cpu` queue, retried by the worker's sweep), each to a grade column of its own that the tool adds to the
LMS course (`scores.column`: found again by its tag), so a lab's score never overwrites the quiz's.

- A lab, once submitted: its score as a percentage (correct ÷ graded questions), of 100.
- An exercise, after each graded run while logged in: 1 of 1 once any run passed, else 0 of 1, to every module
  the student launched that embeds it. The same score twice is sent once.

A link whose grade service does not let the tool add columns (no `lineitem` scope, or no `lineitems` URL) gets the
quiz score only.
"""
from __future__ import annotations

from django.db.models.signals import post_save
from django.dispatch import receiver

from courseapp.models import Module
from courseapp.practice import exercise_ids
from exercises.models import Submission
from exercises.signals import submission_graded
from labs.models import LabAttempt

from .models import ResourceLink
from .scores import enqueue_on_commit, owe


@receiver(post_save, sender=LabAttempt)
def _post_lab_score(sender, instance: LabAttempt, **kwargs) -> None:
    if instance.user_id is None or instance.submitted_at is None or instance.score is None:
        return
    enqueue_on_commit(owe(instance.user_id, instance.module_id, f"lab:{instance.lab_key}",
                          round(instance.score * 100), 100, unless_same=True))


@receiver(submission_graded)
def _post_exercise_score(sender, submission: Submission, **kwargs) -> None:
    if submission.user_id is None or submission.status != Submission.Status.DONE:
        return
    launched = ResourceLink.objects.filter(launched_by=submission.user_id).values("module_id")
    modules = [pk for pk, html in Module.objects.filter(pk__in=launched).values_list("pk", "html")
               if submission.exercise_id in exercise_ids(html or "")]
    if not modules:
        return
    passed = Submission.objects.filter(user_id=submission.user_id, exercise_id=submission.exercise_id,
                                       status=Submission.Status.DONE, passed=True).exists()
    for module_id in modules:
        enqueue_on_commit(owe(submission.user_id, module_id, f"exercise:{submission.exercise_id}", int(passed), 1,
                              unless_same=True))
