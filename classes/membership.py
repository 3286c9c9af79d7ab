"""Which cohorts a user is enrolled in, cached: every course page asks (for due dates and announcements), and
most users are in no cohort, so the answer costs no query on most page views.

The cache entry is dropped whenever one of the user's enrollments is saved or deleted (signals below, in
this process); `TTL` bounds how long another process's copy can be stale when several web processes run
with a per-process cache.
"""
from __future__ import annotations

from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .models import Enrollment

TTL = 300  # seconds


def _key(user_id: int) -> str:
    return f"classes:cohorts-of:{user_id}"


def cohort_ids(user) -> tuple[int, ...]:
    """The ids of the cohorts `user` is enrolled in (none for an anonymous visitor)."""
    if not user.is_authenticated:
        return ()
    ids = cache.get(_key(user.pk))
    if ids is None:
        ids = tuple(Enrollment.objects.filter(user=user).values_list("cohort_id", flat=True))
        cache.set(_key(user.pk), ids, TTL)
    return ids


@receiver(post_save, sender=Enrollment)
@receiver(post_delete, sender=Enrollment)
def _forget(sender, instance: Enrollment, **kwargs) -> None:
    cache.delete(_key(instance.user_id))
