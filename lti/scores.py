"""Assignment and Grade Services: a passed quiz of a module launched from an LMS posts its score to the grade
column (line item) of the launch.

The attempt is never at risk: the `ScorePost` row is written in the attempt's transaction, and the call to the
platform happens only after the commit, with a short timeout (`library.PLATFORM_TIMEOUT`). A platform that is
down or refuses leaves the row `pending` with its reason (logged); `manage.py lti_send_scores` sends what is
pending. The score sent is the student's best for the module, so a later, lower pass never lowers their grade,
and a newer post makes older pending ones for the same link and student `superseded`.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Max
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.grade import Grade
from pylti1p3.service_connector import ServiceConnector

from courseapp.models import QuizAttempt
from courseapp.quiz import pass_mark

from . import library
from .models import Identity, ResourceLink, ScorePost

log = logging.getLogger(__name__)


def owed_for(attempt: QuizAttempt) -> list[ScorePost]:
    """The posts a new attempt owes: one per grade column the student launched this module from, if passed."""
    if attempt.user_id is None or attempt.total == 0 or attempt.score < pass_mark(attempt.total):
        return []
    links = ResourceLink.objects.filter(module_id=attempt.module_id, launched_by=attempt.user_id) \
        .select_related("context__platform")
    best = QuizAttempt.objects.filter(user_id=attempt.user_id, module_id=attempt.module_id, total=attempt.total) \
        .aggregate(best=Max("score"))["best"]
    posts = []
    for link in links:
        if not link.lineitem:
            continue
        identity = Identity.objects.filter(user_id=attempt.user_id, issuer=link.context.platform.issuer).first()
        if identity is None:
            continue
        posts.append(ScorePost.objects.create(resource_link=link, identity=identity,
                                              score_given=best, score_maximum=attempt.total))
    return posts


@receiver(post_save, sender=QuizAttempt)
def _post_passed_quiz(sender, instance: QuizAttempt, created: bool, **kwargs) -> None:
    if not created:
        return
    for post in owed_for(instance):
        transaction.on_commit(lambda pk=post.pk: send(pk))


def _grade(post: ScorePost) -> Grade:
    return (Grade().set_score_given(post.score_given).set_score_maximum(post.score_maximum)
            .set_timestamp(post.created_at.isoformat()).set_activity_progress("Completed")
            .set_grading_progress("FullyGraded").set_user_id(post.identity.subject))


def send(post_pk: int) -> bool:
    """Send one pending post now; True when the platform accepted it. Never raises for a platform's failure."""
    post = ScorePost.objects.select_related("resource_link__context__platform", "identity").filter(
        pk=post_pk, state=ScorePost.State.PENDING).first()
    if post is None:
        return False
    platform = post.resource_link.context.platform
    try:
        registration = library.tool_conf().find_registration_by_params(platform.issuer, platform.client_id)
        connector = ServiceConnector(registration, library.PlatformSession())
        AssignmentsGradesService(connector, post.resource_link.ags).put_grade(_grade(post))
    except Exception as error:  # a platform down, slow or refusing: keep the post for a retry
        post.tries += 1
        post.last_error = f"{type(error).__name__}: {error}"[:2000]
        post.save(update_fields=["tries", "last_error"])
        log.warning("LTI score post %s to %s not accepted (try %s): %s", post.pk, platform.issuer, post.tries,
                    post.last_error)
        return False
    post.state, post.sent_at, post.tries = ScorePost.State.SENT, timezone.now(), post.tries + 1
    post.last_error = ""
    post.save(update_fields=["state", "sent_at", "tries", "last_error"])
    ScorePost.objects.filter(resource_link=post.resource_link, identity=post.identity, created_at__lte=post.created_at,
                             state=ScorePost.State.PENDING).exclude(pk=post.pk) \
        .update(state=ScorePost.State.SUPERSEDED)
    return True


def send_pending() -> tuple[int, int]:
    """Send every pending post, newest first (an older one is superseded by a newer one sent); (sent, failed)."""
    sent = failed = 0
    for pk in ScorePost.objects.filter(state=ScorePost.State.PENDING).order_by("-created_at", "-pk") \
            .values_list("pk", flat=True):
        if not ScorePost.objects.filter(pk=pk, state=ScorePost.State.PENDING).exists():
            continue  # superseded by a newer one sent in this run
        if send(pk):
            sent += 1
        else:
            failed += 1
    return sent, failed
