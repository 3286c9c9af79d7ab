"""Due dates from the LMS: a grade column (AGS line item) with an `endDateTime` is the module's due date in the
LMS course's cohort. Read with the class list (lti/roster.py: an instructor's launch, the cohort page's "Sync",
the `cpu` worker's sweep), through each resource link's own line item, when the launch's grade-service claim lets
the tool read line items. The LMS's date, when it has one, replaces the cohort's (its teacher sets dates in the
LMS); a column with no end date leaves the cohort's as it is. A column that cannot be read changes nothing.
"""
from __future__ import annotations

import logging
from datetime import timezone as dt_timezone

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.service_connector import ServiceConnector

from classes.models import DueDate

from .models import Context

log = logging.getLogger(__name__)
READ_SCOPES = {"https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
               "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"}


def end_of(value) -> object:
    """The line item's `endDateTime` as an aware datetime (UTC when it names no offset), or None."""
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is not None and timezone.is_naive(moment):
        moment = timezone.make_aware(moment, dt_timezone.utc)
    return moment


def refresh(context: Context, connector: ServiceConnector) -> int:
    """Set the cohort's due date of each module whose LMS column has an end date; returns the dates changed."""
    changed = 0
    for link in context.resource_links.select_related("module"):
        ags = link.ags if isinstance(link.ags, dict) else {}
        if not link.lineitem or not READ_SCOPES & set(ags.get("scope") or []):
            continue
        try:
            item = AssignmentsGradesService(connector, ags).get_lineitem(link.lineitem)
        except Exception as error:  # noqa: BLE001 - one column unreadable: the others still count
            log.warning("LTI line item %s not read: %s", link.lineitem, error)
            continue
        due_at = end_of(item.get_end_date_time())
        if due_at is None:
            continue
        due, created = DueDate.objects.get_or_create(cohort=context.cohort, module=link.module,
                                                     defaults={"due_at": due_at})
        if not created and due.due_at != due_at:
            DueDate.objects.filter(pk=due.pk).update(due_at=due_at)
        changed += created or due.due_at != due_at
    return changed
