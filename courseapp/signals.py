"""Merge an anonymous visitor's progress, lab attempts, exercise submissions and finished demo runs into the account
when they log in or sign up (the search index follows module saves in search/signals.py); note a saved module's
exercises for the course map (practice.py); complete a signed-in student's modules when an exercise they needed
passes on the worker (completion.py's rule; a visitor's are settled when they next open the module)."""
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save
from django.dispatch import receiver

from demos.identity import TOKEN_KEY, token_owner
from exercises.signals import submission_graded

from .models import Module
from .practice import exercise_ids, remember
from .progress import VISITOR_SESSION_KEY, Learner, merge_visitor, settle, settle_started


@receiver(user_logged_in, dispatch_uid="courseapp_merge_visitor_progress")
def merge_anonymous_progress(sender, request, user, **kwargs):
    if request is None or not hasattr(request, "session"):
        return
    visitor = request.session.pop(VISITOR_SESSION_KEY, "")
    token = request.session.get(TOKEN_KEY)  # kept: a run still going stays the user's through it
    merge_visitor(visitor, user, token_owner(token) if isinstance(token, str) and token else "")
    settle_started(Learner(user=user, visitor=""))


@receiver(submission_graded, dispatch_uid="courseapp_settle_on_exercise_passed")
def settle_modules_of_passed_exercise(sender, submission, **kwargs):
    if not submission.passed or submission.user_id is None:
        return
    learner = Learner(user=submission.user, visitor="")
    embedding = Module.objects.filter(html__contains=f'data-exercise="{submission.exercise_id}"').defer("source")
    for module in embedding:
        if submission.exercise_id in exercise_ids(module.html):
            settle(learner, module)


@receiver(post_save, sender=Module, dispatch_uid="courseapp_practice_remember_exercises")
def remember_exercises(sender, instance, **kwargs):
    remember(instance)
