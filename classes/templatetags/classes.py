"""What a student sees of their classes on course pages: a module's due date and state, their announcements.

Due statuses are computed once per request (kept on the request), so a course map of many modules costs two
queries, and none for a user in no cohort (classes/membership.py)."""
from __future__ import annotations

from django import template

from classes.deadlines import DueStatus, student_statuses
from classes.membership import cohort_ids
from classes.models import Announcement

register = template.Library()
CACHE_ATTRIBUTE = "_classes_due_statuses"
ANNOUNCEMENTS_SHOWN = 3


def _statuses(context) -> dict[int, DueStatus]:
    request = context.get("request")
    if request is None:
        return {}
    if not hasattr(request, CACHE_ATTRIBUTE):
        setattr(request, CACHE_ATTRIBUTE, student_statuses(request.user))
    return getattr(request, CACHE_ATTRIBUTE)


@register.inclusion_tag("classes/_due_badge.html", takes_context=True)
def due_badge(context, module):
    """A short badge beside a module's link (course map): nothing when the module is not due for this user."""
    return {"due": _statuses(context).get(module.pk)}


@register.inclusion_tag("classes/_due_notice.html", takes_context=True)
def due_notice(context, module):
    """A sentence at the top of a module's page: when it is due and whether it is late."""
    return {"due": _statuses(context).get(module.pk)}


@register.inclusion_tag("classes/_announcements.html", takes_context=True)
def class_announcements(context):
    """The latest announcements of the user's cohorts (none for anonymous visitors)."""
    request = context.get("request")
    cohorts = cohort_ids(request.user) if request is not None else ()
    if not cohorts:
        return {"announcements": []}
    return {"announcements": list(Announcement.objects.filter(cohort_id__in=cohorts)
                                  .select_related("cohort")[:ANNOUNCEMENTS_SHOWN])}
