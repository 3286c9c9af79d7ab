"""A cohort's teacher resends a score the LMS did not accept (the gradebook's "Resend" on a failed post)."""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from classes.access import taught_cohort, teacher_required

from . import scores
from .models import ScorePost


@teacher_required
@require_POST
def resend(request, cohort_id: int, post_id: int):
    """Only a teacher of the cohort the post's LMS course is (404 for anyone else's cohort or post)."""
    cohort = taught_cohort(request, cohort_id)
    post = get_object_or_404(ScorePost.objects.select_related("identity__user"), pk=post_id,
                             resource_link__context__cohort=cohort)
    if post.state != ScorePost.State.FAILED:
        messages.info(request, "That score is not failed (any more): nothing to resend.")
    else:
        scores.resend(post)
        messages.success(request, f"The score {post.score_given}/{post.score_maximum} of "
                                  f"{post.identity.user.get_full_name() or post.identity.user.username} "
                                  f"is queued to be sent to the LMS again.")
    if request.POST.get("back") == "student":  # the per-student page's button
        return redirect("classes:student", cohort.pk, post.identity.user_id)
    return redirect("classes:gradebook", cohort.pk)
