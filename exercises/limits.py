"""Who may queue another submission now: per owner, per client address, and all together.

Counted from the Submission rows themselves (indexed by owner, address and status), so every Daphne process sees
the same counts and a refused request writes nothing: 1,000 presses in a minute cost 20 sandbox runs and 980
two-query refusals. Overridable in settings (EXERCISE_*); the defaults are sized for one student pressing
"Run tests" while editing, and a class of 60 behind one NAT.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import Submission

WINDOW = timedelta(seconds=60)


def setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_code_chars() -> int:
    return setting("EXERCISE_MAX_CODE_CHARS", 20_000)


def queue_timeout() -> timedelta:
    """An active submission older than this was lost (no worker, or a worker that died): it counts no more."""
    return timedelta(seconds=setting("EXERCISE_QUEUE_TIMEOUT", 60))


@dataclass(frozen=True)
class Refusal:
    status: int  # 429: this visitor or address, 503: everyone
    code: str
    message: str
    retry_after: int


def _retry_after(rows) -> int:
    oldest = rows.order_by("created_at").values_list("created_at", flat=True).first()
    if oldest is None:
        return 1
    return max(1, math.ceil((oldest + WINDOW - timezone.now()).total_seconds()))


def refusal(owner: str, client: str) -> Refusal | None:
    """Why `owner` (from `client`) may not queue a submission now; None when they may."""
    now = timezone.now()
    recent = now - WINDOW
    active_since = now - queue_timeout()
    per_minute = setting("EXERCISE_RUNS_PER_MINUTE", 20)
    mine = Submission.objects.filter(owner=owner, created_at__gte=recent)
    if mine.count() >= per_minute:
        return Refusal(429, "too_many_runs", f"That is {per_minute} runs in a minute: wait a little before the "
                       "next one.", _retry_after(mine))
    active = Submission.objects.filter(owner=owner, status__in=Submission.ACTIVE, created_at__gte=active_since)
    if active.count() >= setting("EXERCISE_ACTIVE_PER_OWNER", 2):
        return Refusal(429, "run_in_progress", "Your previous run is still going: its results come first.", 1)
    if client:
        per_address = setting("EXERCISE_RUNS_PER_MINUTE_PER_ADDRESS", 240)
        theirs = Submission.objects.filter(client=client, created_at__gte=recent)
        if theirs.count() >= per_address:
            return Refusal(429, "too_many_runs_from_address", "Too many runs from your network in the last minute: "
                           "wait a little.", _retry_after(theirs))
    queued = Submission.objects.filter(status=Submission.Status.QUEUED, created_at__gte=active_since)
    if queued.count() >= setting("EXERCISE_MAX_QUEUED", 200):
        return Refusal(503, "busy", "The test runners are busy: try again in a few seconds.", 5)
    return None
