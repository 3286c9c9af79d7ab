"""Who is an instructor: a staff account in the `instructor` group (migration 0002 gives the group the
authoring permission and the course's admin permissions, nothing else)."""
from __future__ import annotations

from django.contrib.auth.models import Group

GROUP = "instructor"


def make_instructor(user) -> None:
    """Staff (so the admin opens) with exactly the group's permissions; not a superuser."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.groups.add(Group.objects.get(name=GROUP))
