"""Names and Role Provisioning: the cohort follows the LMS course's class list.

A launch that carries the membership service's address keeps it on the cohort's `Context`. The list is read
(paged, behind a token the platform grants against the tool's key) on an instructor's launch, when a teacher
presses "Sync the class list" on the cohort page, and by the `cpu` worker's sweep (workers/roster.py) every
LTI_ROSTER_SYNC_EVERY seconds (6 h by default; LTI_ROSTER_RETRY after a failure), so the stack keeps it current
with nothing run by hand. The LMS's due dates (its grade columns' end dates: lti/due_dates.py) are read with it.

Every active member with a learner role gets their account (the same one their own launch would find: by issuer
and `user_id` = their `sub`) and is enrolled; teaching roles are named teachers. A student the list no longer has
as an active learner (gone, Inactive, Deleted) is marked inactive in the cohort: never unenrolled, so their work
and grades stay and the gradebook shows them as having left; one who comes back is active again. A teacher the
list no longer has as one stops teaching the cohort, unless that would leave it with none. Only accounts of this
LMS are touched (a student who joined by invite code is the teacher's to remove). A list that cannot be read in
full, or that is empty, changes nothing.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector

from classes.models import Enrollment

from . import due_dates, library
from .accounts import account_for, join, learns, teaches
from .models import Context, Identity

log = logging.getLogger(__name__)

NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
CLAIM_SECONDS = 300  # one context's reading and applying, at PLATFORM_TIMEOUT per page
ANSWER_CHARS = 2000


def _setting(name: str) -> float:
    return float(getattr(settings, name))  # settings.py reads each from the environment


@dataclass(frozen=True)
class RosterChange:
    added: int = 0  # students newly enrolled, or back after having left
    left: int = 0  # students marked as having left
    teachers_removed: int = 0

    def __str__(self) -> str:
        return (f"{self.added} student{'s' if self.added != 1 else ''} newly enrolled, {self.left} marked as having "
                f"left" + (f", {self.teachers_removed} teacher(s) no longer teaching" if self.teachers_removed else ""))


def remember_service(data: dict, context: Context) -> None:
    """Keep the class list's address a launch carries (the sweep reads it from then on)."""
    service = data.get(NRPS_CLAIM)
    url = service.get("context_memberships_url") if isinstance(service, dict) else None
    if isinstance(url, str) and url.startswith(("https://", "http://")) and url != context.memberships_url:
        Context.objects.filter(pk=context.pk).update(memberships_url=url[:1000])
        context.memberships_url = url[:1000]


def _member_claims(issuer: str, member: dict) -> dict:
    return {"iss": issuer, "sub": str(member["user_id"]), "email": member.get("email"), "name": member.get("name"),
            "given_name": member.get("given_name"), "family_name": member.get("family_name")}


def _leave(enrollments, now) -> int:
    return enrollments.filter(active=True).update(active=False, left_at=now)


@transaction.atomic
def apply_roster(issuer: str, context: Context, members: list[dict], *, keep=None) -> RosterChange:
    """Accounts, enrollments and teachers as the class list has them. `keep`: the teacher launching now, who
    teaches whatever the list says (their launch is the LMS's newer word)."""
    cohort, now = context.cohort, timezone.now()
    students, teachers = set(), set() if keep is None else {keep.pk}
    added = 0
    for member in members:
        if not isinstance(member, dict) or not member.get("user_id") or member.get("status", "Active") != "Active":
            continue
        roles = member.get("roles", [])
        if teaches(roles):
            user = account_for(_member_claims(issuer, member))
            join(context, user, teacher=True)
            teachers.add(user.pk)
        elif learns(roles):
            user = account_for(_member_claims(issuer, member))
            added += join(context, user, teacher=False)
            students.add(user.pk)
    of_this_lms = Identity.objects.filter(issuer=issuer).values("user_id")
    left = _leave(Enrollment.objects.filter(cohort=cohort, user__in=of_this_lms).exclude(user__in=students), now)
    gone = list(cohort.instructors.filter(pk__in=of_this_lms).exclude(pk__in=teachers))
    if gone and cohort.instructors.count() > len(gone):  # a cohort always keeps a teacher
        cohort.instructors.remove(*gone)
    else:
        gone = []
    return RosterChange(added=added, left=left, teachers_removed=len(gone))


def connector_for(context: Context) -> ServiceConnector:
    platform = context.platform
    registration = library.tool_conf().find_registration_by_params(platform.issuer, platform.client_id)
    return ServiceConnector(registration, library.PlatformSession())


def fetch_members(context: Context, connector: ServiceConnector) -> list[dict]:
    """Every page of the class list (raises when the platform is down, slow or refuses)."""
    service = NamesRolesProvisioningService(connector, {"context_memberships_url": context.memberships_url})
    return service.get_members()


def sync(context: Context, *, keep=None) -> RosterChange | None:
    """Read the class list now and apply it; None (its reason kept in `roster_answer`) when it could not be read.
    Either way the sweep's next reading is scheduled."""
    now = timezone.now()
    try:
        connector = connector_for(context)
        members = fetch_members(context, connector)
        if not members:
            raise ValueError("the LMS listed nobody in the course (nothing changed)")
        change = apply_roster(context.platform.issuer, context, members, keep=keep)
        due_dates.refresh(context, connector)  # the LMS's end dates, read on the same schedule
    except Exception as error:  # noqa: BLE001 - the membership service down, slow, refusing or malformed
        answer = f"Not read: {type(error).__name__}: {error}"[:ANSWER_CHARS]
        log.warning("LTI class list of %s not read: %s", context, answer)
        Context.objects.filter(pk=context.pk).update(
            roster_answer=answer, roster_claimed_until=None,
            roster_next_at=now + timedelta(seconds=_setting("LTI_ROSTER_RETRY")))
        return None
    Context.objects.filter(pk=context.pk).update(
        roster_answer=f"{len(members)} members listed: {change}."[:ANSWER_CHARS], roster_synced_at=now,
        roster_claimed_until=None, roster_next_at=now + timedelta(seconds=_setting("LTI_ROSTER_SYNC_EVERY")))
    return change


def claim(context_pk: int) -> bool:
    """Take a context for CLAIM_SECONDS (one conditional UPDATE: two sweeps never read one list at once)."""
    now = timezone.now()
    return Context.objects.filter(pk=context_pk).filter(
        Q(roster_claimed_until__isnull=True) | Q(roster_claimed_until__lt=now)) \
        .update(roster_claimed_until=now + timedelta(seconds=CLAIM_SECONDS)) == 1


def sync_due(limit: int = 20) -> tuple[int, int]:
    """Read the class lists whose time has come; (read, not read). The `cpu` worker's sweep."""
    now = timezone.now()
    due = Context.objects.exclude(memberships_url="") \
        .filter(Q(roster_next_at__isnull=True) | Q(roster_next_at__lte=now)) \
        .filter(Q(roster_claimed_until__isnull=True) | Q(roster_claimed_until__lt=now)) \
        .order_by("roster_next_at", "pk").values_list("pk", flat=True)[:limit]
    done = failed = 0
    for pk in list(due):
        if not claim(pk):
            continue
        context = Context.objects.select_related("platform", "cohort").get(pk=pk)
        if sync(context) is None:
            failed += 1
        else:
            done += 1
    return done, failed


def sync_roster(request, context: Context, *, keep=None) -> None:
    """Read the class list for a teacher (an instructor's launch, the cohort page's button), saying what changed."""
    change = sync(context, keep=keep)
    if change is None:
        messages.warning(request, "The class list could not be fetched from the LMS just now; students are "
                                  "enrolled as they open the course's links, and the list is read again later.")
        return
    active = context.cohort.enrollments.filter(active=True).count()
    messages.info(request, f"Class list from the LMS: {change}; “{context.cohort.name}” has {active} active "
                           f"student{'s' if active != 1 else ''}.")
