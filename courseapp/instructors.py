"""Who is an instructor: a staff account in the `instructor` group (migration 0002 gives the group the
authoring permission and the course's admin permissions, nothing else)."""
from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

GROUP = "instructor"
PERMISSION = "courseapp.instructor"


def instructor_required(view):
    """Login required (redirect), then the instructor permission (403)."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.has_perm(PERMISSION):
            raise PermissionDenied("Only instructors can author course content.")
        return view(request, *args, **kwargs)

    return wrapper


def make_instructor(user) -> None:
    """Staff (so the admin opens) with exactly the group's permissions; not a superuser."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.groups.add(Group.objects.get(name=GROUP))
