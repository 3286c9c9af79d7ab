"""Assignment and Grade Services: every quiz attempt of a module launched from an LMS posts the student's best
score for it to the grade column (line item) of the launch, off the request path.

The attempt's transaction writes a `ScorePost` row; after the commit the request only puts a job on the `cpu`
queue (`SEND_TASK`, run by workers/scores.py) and returns: it never waits on the platform, and a broker that
cannot be reached costs it at most a failed connect (the row stays pending). The worker sends the post; a
platform that is down, slow or busy gets it again after a pause that doubles each try (`retry_delay`), sent by the
`cpu` worker's own sweep (`send_due`, every LTI_SCORE_SWEEP_INTERVAL seconds), which also sends a post whose
queued job has not run within LTI_SCORE_QUEUE_GRACE seconds. No command or cron job is needed; `manage.py
lti_send_scores` sends what is pending at once. A refusal that no retry can change (a 4xx other than 408/429), or
LTI_SCORE_MAX_TRIES tries, makes the post `failed`, which a teacher can resend from the gradebook.

The score sent is the student's best for the module, so a later, lower attempt never lowers their grade; a newer
post supersedes the older ones not yet accepted for the same grade column and student. A worker claims a post
(`claimed_until`) before sending it, so a queued job and the sweep never send one post twice at once.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiServiceException
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem
from pylti1p3.service_connector import ServiceConnector

from courseapp.models import QuizAttempt
from demos.runstate import CPU_QUEUE
from inferencelab.celery import app

from . import library
from .models import Identity, ResourceLink, ScorePost

log = logging.getLogger(__name__)

SEND_TASK = "lti.send_score"  # workers/scores.py runs it
# Long enough for a token request and a score post, each bounded by library.PLATFORM_TIMEOUT per read.
CLAIM_SECONDS = 120
SWEEP_BATCH = 50  # posts one sweep pass sends at most (the next pass takes the rest)
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"  # the tool may add grade columns
RETRYABLE_STATUSES = {408, 425, 429}  # a 4xx that may pass later; every other 4xx is an answer a retry repeats
ANSWER_CHARS = 2000


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def retry_delay(tries: int) -> timedelta:
    """The pause after the `tries`-th failed try: LTI_SCORE_RETRY_BASE seconds, doubled each try, at most
    LTI_SCORE_RETRY_CAP (30 s, 1 min, 2 min… 6 h by default)."""
    base, cap = _setting("LTI_SCORE_RETRY_BASE", 30), _setting("LTI_SCORE_RETRY_CAP", 6 * 3600)
    return timedelta(seconds=min(cap, base * 2 ** max(0, tries - 1)))


# --- What an attempt owes ------------------------------------------------------------------------------------

def adds_columns(link: ResourceLink) -> bool:
    """Whether the link's grade service lets the tool add a column (a lab's or an exercise's, beside the quiz's)."""
    ags = link.ags if isinstance(link.ags, dict) else {}
    return bool(ags.get("lineitems")) and LINEITEM_SCOPE in (ags.get("scope") or [])


def owe(user_id: int, module_id: int, activity: str, best: int, maximum: int, *,
        unless_same: bool = False) -> list[ScorePost]:
    """A post of `best`/`maximum` to each grade column the student launched this module from (for a lab or an
    exercise: its own column, on links that let the tool add one); older posts not yet accepted for the same column,
    student and activity are superseded by it. `unless_same`: none where the newest post already carries it."""
    posts = []
    for link in ResourceLink.objects.filter(module_id=module_id, launched_by=user_id).select_related(
            "context__platform"):
        if not link.lineitem or (activity != "quiz" and not adds_columns(link)):
            continue
        identity = Identity.objects.filter(user_id=user_id, issuer=link.context.platform.issuer).first()
        if identity is None:
            continue
        if unless_same and ScorePost.objects.filter(resource_link=link, identity=identity, activity=activity) \
                .exclude(state__in=[ScorePost.State.SUPERSEDED, ScorePost.State.FAILED]) \
                .order_by("-created_at", "-pk").values_list("score_given", "score_maximum").first() == (best, maximum):
            continue
        ScorePost.objects.filter(resource_link=link, identity=identity, activity=activity,
                                 state__in=[ScorePost.State.PENDING, ScorePost.State.FAILED]) \
            .update(state=ScorePost.State.SUPERSEDED)
        grace = timedelta(seconds=_setting("LTI_SCORE_QUEUE_GRACE", 60))
        posts.append(ScorePost.objects.create(resource_link=link, identity=identity, activity=activity,
                                              score_given=best, score_maximum=maximum,
                                              next_try_at=timezone.now() + grace))
    return posts


def owed_for(attempt: QuizAttempt) -> list[ScorePost]:
    """The posts a new attempt owes, passed or not: the student's best for the module so far."""
    if attempt.user_id is None or attempt.total == 0:
        return []
    best = QuizAttempt.objects.filter(user_id=attempt.user_id, module_id=attempt.module_id, total=attempt.total) \
        .aggregate(best=Max("score"))["best"]
    return owe(attempt.user_id, attempt.module_id, "quiz", best, attempt.total)


def enqueue(post_pk: int) -> bool:
    """Put the post's job on the `cpu` queue; False (logged) when the broker cannot be reached: the sweep sends it
    after LTI_SCORE_QUEUE_GRACE. One quick connect, never the broker client's own retries (seconds)."""
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0.1, timeout=1)
            app.send_task(SEND_TASK, args=[post_pk], queue=CPU_QUEUE, retry=False, connection=connection)
    except Exception as error:  # noqa: BLE001 - the row is kept; the worker's sweep sends it
        log.warning("LTI score post %s not queued (%s); the worker's sweep will send it", post_pk, error)
        return False
    return True


def enqueue_on_commit(posts: list[ScorePost]) -> None:
    for post in posts:
        transaction.on_commit(lambda pk=post.pk: enqueue(pk))


@receiver(post_save, sender=QuizAttempt)
def _post_quiz_score(sender, instance: QuizAttempt, created: bool, **kwargs) -> None:
    if created:
        enqueue_on_commit(owed_for(instance))


# --- Sending (on the `cpu` workers) --------------------------------------------------------------------------

def _grade(post: ScorePost) -> Grade:
    return (Grade().set_score_given(post.score_given).set_score_maximum(post.score_maximum)
            .set_timestamp(post.created_at.isoformat()).set_activity_progress("Completed")
            .set_grading_progress("FullyGraded").set_user_id(post.identity.subject))


def column(post: ScorePost) -> LineItem:
    """A lab's or an exercise's own grade column in the LMS course, found again by its tag (or added)."""
    link = post.resource_link
    kind, _, key = post.activity.partition(":")
    return (LineItem().set_tag(f"inference-lab:{link.module.slug}:{post.activity}")
            .set_label(f"{link.module.title}: {kind} {key}").set_score_maximum(post.score_maximum)
            .set_resource_id(f"{link.module.slug}:{post.activity}").set_resource_link_id(link.resource_link_id))


def claim(post_pk: int, *, due_only: bool = False) -> bool:
    """Take a pending post for CLAIM_SECONDS (one conditional UPDATE: no other worker sends it meanwhile)."""
    now = timezone.now()
    rows = ScorePost.objects.filter(pk=post_pk, state=ScorePost.State.PENDING) \
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    if due_only:
        rows = rows.filter(Q(next_try_at__isnull=True) | Q(next_try_at__lte=now))
    return rows.update(claimed_until=now + timedelta(seconds=CLAIM_SECONDS)) == 1


def _answer_of(error: Exception) -> tuple[str, bool]:
    """(the platform's answer in words, whether a retry may change it)."""
    response = getattr(error, "response", None)
    if isinstance(error, LtiServiceException) and response is not None:
        text = f"HTTP {response.status_code} {response.reason or ''}".strip()
        body = (response.text or "").strip()
        retry = response.status_code >= 500 or response.status_code in RETRYABLE_STATUSES
        return (f"{text}: {body}" if body else text)[:ANSWER_CHARS], retry
    return f"No answer: {type(error).__name__}: {error}"[:ANSWER_CHARS], True  # down, slow, unreachable


def send(post_pk: int, *, due_only: bool = False) -> bool:
    """Send one pending post now (if no other worker has it); True when the platform accepted it. Never raises
    for a platform's failure: it schedules the next try, or marks the post failed."""
    if not claim(post_pk, due_only=due_only):
        return False
    post = ScorePost.objects.select_related("resource_link__context__platform", "resource_link__module",
                                            "identity").get(pk=post_pk)
    platform = post.resource_link.context.platform
    post.tries += 1
    try:
        registration = library.tool_conf().find_registration_by_params(platform.issuer, platform.client_id)
        connector = ServiceConnector(registration, library.PlatformSession())
        grades = AssignmentsGradesService(connector, post.resource_link.ags)
        lineitem = None if post.activity == "quiz" else grades.find_or_create_lineitem(column(post), find_by="tag")
        reply = grades.put_grade(_grade(post), lineitem)
    except Exception as error:  # a platform down, slow or refusing
        post.answer, retry = _answer_of(error)
        post.last_error = post.answer
        given_up = not retry or post.tries >= _setting("LTI_SCORE_MAX_TRIES", 16)
        post.state = ScorePost.State.FAILED if given_up else ScorePost.State.PENDING
        post.next_try_at = None if given_up else timezone.now() + retry_delay(post.tries)
        post.claimed_until = None
        post.save(update_fields=["tries", "answer", "last_error", "state", "next_try_at", "claimed_until"])
        log.warning("LTI score post %s to %s not accepted (try %s, %s): %s", post.pk, platform.issuer, post.tries,
                    "given up" if given_up else f"next at {post.next_try_at:%H:%M:%S}", post.answer)
        return False
    body = reply.get("body") if isinstance(reply, dict) else None
    post.answer = ("Accepted" + (f": {body}" if body else ""))[:ANSWER_CHARS]
    post.state, post.sent_at, post.last_error = ScorePost.State.SENT, timezone.now(), ""
    post.next_try_at = post.claimed_until = None
    post.save(update_fields=["tries", "answer", "state", "sent_at", "last_error", "next_try_at", "claimed_until"])
    return True


def send_due(limit: int = SWEEP_BATCH) -> tuple[int, int]:
    """Send the pending posts whose time has come, newest first; (sent, not sent). The worker's sweep."""
    now = timezone.now()
    due = ScorePost.objects.filter(state=ScorePost.State.PENDING) \
        .filter(Q(next_try_at__isnull=True) | Q(next_try_at__lte=now)) \
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)) \
        .order_by("-created_at", "-pk").values_list("pk", flat=True)[:limit]
    sent = failed = 0
    for pk in list(due):
        if send(pk, due_only=True):
            sent += 1
        else:
            failed += 1
    return sent, failed


def send_pending() -> tuple[int, int]:
    """Every pending post now, whatever its schedule (`manage.py lti_send_scores`); (sent, not sent)."""
    ScorePost.objects.filter(state=ScorePost.State.PENDING).update(next_try_at=None)
    totals = [0, 0]
    while True:
        sent, failed = send_due()
        totals[0], totals[1] = totals[0] + sent, totals[1] + failed
        if sent + failed < SWEEP_BATCH:
            return totals[0], totals[1]


def resend(post: ScorePost) -> None:
    """A failed post pending again, from its first try, and queued now (a teacher's "Resend")."""
    ScorePost.objects.filter(pk=post.pk, state=ScorePost.State.FAILED).update(
        state=ScorePost.State.PENDING, tries=0, next_try_at=timezone.now() + timedelta(
            seconds=_setting("LTI_SCORE_QUEUE_GRACE", 60)), claimed_until=None)
    enqueue_on_commit([post])
