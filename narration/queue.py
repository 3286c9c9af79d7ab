"""The narration queue's order and each job's place in it, kept in the database.

A Celery message to the `cpu` workers is a ticket, not an assignment: the worker that takes one runs the
pending narration that comes first by (priority, queued_at) (`claim_next`), whichever module the ticket was
sent for. Every job queued sends one ticket, so every pending job is run; and an instructor's job for one
module (priority `INSTRUCTOR`) goes ahead of every job of a bulk regeneration (`BULK`) queued before it,
whatever order the broker delivers tickets in. A claim is one conditional UPDATE, so two worker threads
never run the same job.
"""
from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from .models import Narration

INSTRUCTOR, BULK = 0, 1
CLAIM_CANDIDATES = 20  # pending rows tried per claim (another worker may take the first ones meanwhile)


def pending():
    return Narration.objects.filter(status=Narration.Status.PENDING).order_by("priority", "queued_at", "pk")


def claim_next() -> Narration | None:
    """Mark the first pending job running and return it; None when nothing is pending."""
    for record in pending()[:CLAIM_CANDIDATES]:
        claimed = Narration.objects.filter(pk=record.pk, status=Narration.Status.PENDING).update(
            status=Narration.Status.RUNNING, progress=0.0, updated_at=timezone.now())
        if claimed:
            record.status = Narration.Status.RUNNING
            return record
    return None


def position(record: Narration) -> int | None:
    """1 for the next job to run, 2 for the one after it…; None unless `record` is pending."""
    if record.status != Narration.Status.PENDING or record.queued_at is None:
        return None
    ahead = Q(priority__lt=record.priority) | Q(priority=record.priority, queued_at__lt=record.queued_at) \
        | Q(priority=record.priority, queued_at=record.queued_at, pk__lt=record.pk)
    return pending().filter(ahead).count() + 1


def running() -> int:
    return Narration.objects.filter(status=Narration.Status.RUNNING).count()
