"""Who may do what in classes. Two roles, held apart:

- a *course author* (courseapp/instructors.py: the instructor permission, `manage.py createinstructor`) edits the
  course and may create cohorts;
- a *section teacher* is named on a cohort (`Cohort.instructors`), by a colleague on the cohort's page or by an
  LTI launch with an Instructor or TeachingAssistant role in that LMS course. Teaching needs no author permission
  and authoring opens no cohort: everyone manages only the cohorts that name them (superusers: all).

A student, or an anonymous visitor, never reaches a cohort's management pages (403, or the login page); a
teacher reaching a cohort that does not name them gets 404, as if it did not exist.
"""
from __future__ import annotations

from functools import wraps

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from courseapp.instructors import PERMISSION

from .models import Cohort


def is_teacher(user) -> bool:
    """An account that authors or runs the course: never a student, never in class figures."""
    return user.is_staff or user.is_superuser or user.has_perm(PERMISSION)


def runs_classes(user) -> bool:
    """A course author, or a teacher of at least one cohort: the classes pages open (each cohort still checks)."""
    return user.is_authenticated and (user.has_perm(PERMISSION) or user.is_superuser
                                      or Cohort.objects.filter(instructors=user).exists())


def teacher_required(view):
    """Login required (redirect), then an author or a cohort's teacher (403)."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not runs_classes(request.user):
            raise PermissionDenied("Only a course author or a cohort's teacher can open this page.")
        return view(request, *args, **kwargs)

    return wrapper


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
