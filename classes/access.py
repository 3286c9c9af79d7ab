"""Who may do what in classes: instructors (courseapp/instructors.py) manage the cohorts that name them.

A student, or an anonymous visitor, never reaches a cohort's management pages (403, or the login page); an
instructor reaching a cohort that does not name them gets 404, as if it did not exist.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from courseapp.instructors import PERMISSION, instructor_required

from .models import Cohort

teacher_required = instructor_required  # login (redirect), then the instructor permission (403)


def is_teacher(user) -> bool:
    """An account that authors or runs the course: never a student, never in class figures."""
    return user.is_staff or user.is_superuser or user.has_perm(PERMISSION)


def teachers() -> QuerySet:
    """Every account `is_teacher` is true for, as a queryset (to exclude them in the database)."""
    User = get_user_model()
    # The model backend decides permissions (the other configured backend only throttles logins).
    with_permission = User.objects.with_perm(PERMISSION, include_superusers=True,
                                             backend="django.contrib.auth.backends.ModelBackend")
    return User.objects.filter(is_staff=True) | User.objects.filter(pk__in=with_permission.values("pk"))


def taught_cohort(request, cohort_id: int) -> Cohort:
    """The cohort if the request's user teaches it; 404 otherwise."""
    return get_object_or_404(Cohort.objects.taught_by(request.user), pk=cohort_id)
