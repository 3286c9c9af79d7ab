"""Names and Role Provisioning: an instructor's launch fills the cohort with the LMS course's roster.

Every active member with a learner role gets their account (the same one their own launch would find: by
issuer and `user_id` = their `sub`) and is enrolled; instructor roles are named instructors. Members are only
added: one who leaves the LMS course stays enrolled here until an instructor removes them. A platform that is
down or refuses costs the instructor a message, never the launch.
"""
from __future__ import annotations

import logging

from django.contrib import messages
from django.db import transaction

from .accounts import account_for, join, learns, teaches
from .models import Context

log = logging.getLogger(__name__)


def _member_claims(issuer: str, member: dict) -> dict:
    return {"iss": issuer, "sub": str(member["user_id"]), "email": member.get("email"),
            "given_name": member.get("given_name"), "family_name": member.get("family_name")}


@transaction.atomic
def enroll_members(issuer: str, context: Context, members: list[dict]) -> int:
    """Accounts and enrollments for the roster's active members; returns the students newly enrolled."""
    added = 0
    for member in members:
        if not isinstance(member, dict) or not member.get("user_id"):
            continue
        if member.get("status", "Active") != "Active":
            continue
        roles = member.get("roles", [])
        if teaches(roles):
            join(context, account_for(_member_claims(issuer, member)), teacher=True)
        elif learns(roles):
            added += join(context, account_for(_member_claims(issuer, member)), teacher=False)
    return added


def sync_roster(request, launch, context: Context) -> None:
    try:
        members = launch.get_nrps().get_members()
    except Exception as error:  # the LMS's membership service down, slow or refusing
        log.warning("LTI roster of %s not fetched: %s", context, error)
        messages.warning(request, "The class list could not be fetched from the LMS just now; students are "
                                  "enrolled as they open the course's links.")
        return
    added = enroll_members(launch.get_iss(), context, members)
    total = context.cohort.enrollments.count()
    messages.info(request, f"Class list from the LMS: {added} student{'s' if added != 1 else ''} newly enrolled; "
                           f"“{context.cohort.name}” has {total}.")
