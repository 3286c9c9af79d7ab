"""The exercise pages and their two endpoints: "Run tests" queues a submission (202 and a URL to poll) and the poll
returns its graded result to its owner only.

Owners are named as the demos name them (demos/identity.py): a signed-in user, or an anonymous visitor's session
token. An anonymous visitor gets a session at their first run, counted per address like the demos' visitors.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.http import Http404, HttpRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from demos.identity import TOKEN_KEY, address_owner, owners_for_request
from inferencelab.address_quota import VISITOR_SESSION
from inferencelab.client_address import for_request

from . import catalog, limits
from .embed import widget_context
from .jobs import enqueue, fail
from .models import Submission

log = logging.getLogger(__name__)


def _known_owners(request: HttpRequest) -> tuple[str, ...]:
    """The owners whose submissions this request may read, creating nothing."""
    if not request.user.is_authenticated and not request.session.get(TOKEN_KEY):
        return ()
    return owners_for_request(request)


def _error(status: int, code: str, message: str, retry_after: int | None = None) -> JsonResponse:
    response = JsonResponse({"error": code, "message": message, "retry_after": retry_after}, status=status)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


@require_GET
def exercise_index(request: HttpRequest):
    return render(request, "exercises/index.html", {"exercises": list(catalog.EXERCISES.values())})


@require_GET
def exercise_page(request: HttpRequest, exercise_id: str):
    exercise = catalog.get(exercise_id)
    if exercise is None:
        raise Http404("No such exercise")
    owners = _known_owners(request)
    last = Submission.objects.filter(owner__in=owners, exercise_id=exercise.id).first() if owners else None
    context = widget_context(exercise, last.code if last else None, standalone=True)
    # After a reload, a latest run that passed still drives a live run (the server checks it again at start).
    context["passed_submission"] = str(last.pk) if last is not None and last.passed else ""
    return render(request, "exercises/exercise.html", context)


@never_cache
@require_POST
def run(request: HttpRequest, exercise_id: str):
    exercise = catalog.get(exercise_id)
    if exercise is None:
        return _error(404, "no_such_exercise", "There is no such exercise.")
    code = request.POST.get("code")
    if not isinstance(code, str):
        return _error(400, "no_code", "Send your code in the `code` field.")
    if len(code) > limits.max_code_chars():
        return _error(413, "code_too_large", f"Your code is longer than {limits.max_code_chars():,} characters.")
    if not request.user.is_authenticated and not request.session.get(TOKEN_KEY):
        if wait := VISITOR_SESSION.wait(request):  # a flood of cookie-less requests makes no sessions
            return _error(429, "too_many_visitors", "Too many new visitors from your network: sign in, or wait.",
                          wait)
        VISITOR_SESSION.record(request)
    owner = owners_for_request(request)[0]  # creates the visitor's token (the session middleware saves it)
    client = address_owner(for_request(request))
    # One transaction: on SQLite (IMMEDIATE) two presses cannot both pass the count; elsewhere at most a few can.
    with transaction.atomic():
        refused = limits.refusal(owner, client)
        if refused is not None:
            return _error(refused.status, refused.code, refused.message, refused.retry_after)
        submission = Submission.objects.create(
            exercise_id=exercise.id, owner=owner, client=client, code=code,
            user=request.user if request.user.is_authenticated else None)
    try:
        enqueue(submission)
    except Exception:  # noqa: BLE001 - the broker is down: say so rather than leave a run that never starts
        log.exception("could not queue exercise submission %s", submission.pk)
        fail(submission.pk, "The test runners cannot be reached right now; try again in a minute.")
        return _error(503, "no_workers", "The test runners cannot be reached right now; try again in a minute.", 30)
    return JsonResponse({"id": str(submission.pk), "status": submission.status,
                         "poll": reverse("exercises:run_status", args=[submission.pk])}, status=202)


def state(submission: Submission) -> dict:
    final = submission.status not in Submission.ACTIVE
    return {"id": str(submission.pk), "exercise": submission.exercise_id, "status": submission.status,
            "passed": submission.passed, "result": submission.results if final else None}


@never_cache
@require_GET
def run_status(request: HttpRequest, submission_id):
    owners = _known_owners(request)
    submission = Submission.objects.filter(pk=submission_id, owner__in=owners).first() if owners else None
    if submission is None:
        return _error(404, "no_such_run", "There is no such run (or it is not yours).")
    if submission.status in Submission.ACTIVE and submission.created_at < timezone.now() - limits.queue_timeout():
        seconds = int(limits.queue_timeout().total_seconds())
        fail(submission.pk, f"No test runner finished this run within {seconds} s; press Run tests again.")
        submission.refresh_from_db()
    return JsonResponse(state(submission))
