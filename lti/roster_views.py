"""A cohort's teacher reads its LMS class list now (the cohort page's "Sync the class list from the LMS")."""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from classes.access import taught_cohort, teacher_required

from . import roster
from .models import Context


@teacher_required
@require_POST
def sync(request, cohort_id: int):
    """Only a teacher of the cohort (404 for anyone else's, or for a cohort no LMS course runs)."""
    cohort = taught_cohort(request, cohort_id)
    context = get_object_or_404(Context.objects.select_related("platform", "cohort"), cohort=cohort)
    if not context.memberships_url:
        messages.warning(request, "The LMS has not offered this course's class list (its launches carry no "
                                  "membership service): students are enrolled as they open the course's links.")
    elif not roster.claim(context.pk):
        messages.info(request, "The class list is being read right now; reload this page in a moment.")
    else:
        roster.sync_roster(request, context)
    return redirect("classes:cohort", cohort.pk)
