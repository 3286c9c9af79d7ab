"""From a validated launch to local rows: the account (by issuer and subject), the cohort (by LMS context),
the enrollment, and the resource link (which module, which grade column).

Invariants: one account per (issuer, sub), made on the first launch with an unusable password (the LMS is how
they sign in) and never matched by email or name, so one LMS cannot claim another's account. One cohort per
(registration, deployment, context), made by the first launch from that course; LMS instructors (and
administrators, designers) are named its instructors and never enrolled; everyone else is enrolled as a student.
Opening the cohort's pages still needs the course's instructor permission (`manage.py createinstructor`), which
a launch never grants: an LMS role does not give authoring rights here.
"""
from __future__ import annotations

import hashlib

from django.contrib.auth import get_user_model
from django.db import transaction
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool
from pylti1p3.roles import DesignerRole, StaffRole, StudentRole, TeacherRole

from classes.access import is_teacher
from classes.models import Cohort, Enrollment

from .models import Context, Identity, ResourceLink

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"


def teaches(roles: list) -> bool:
    """An instructor role (Instructor, Administrator, ContentDeveloper; institution faculty or staff)."""
    body = {CLAIM + "roles": roles if isinstance(roles, list) else []}
    return TeacherRole(body).check() or StaffRole(body).check() or DesignerRole(body).check()


def learns(roles: list) -> bool:
    return StudentRole({CLAIM + "roles": roles if isinstance(roles, list) else []}).check()


def claim(data: dict, name: str, default=None):
    value = data.get(CLAIM + name, default)
    return default if value is None else value


def platform_of(data: dict) -> LtiTool:
    aud = data.get("aud")
    client_id = data.get("azp") or (aud[0] if isinstance(aud, list) else aud)
    return LtiTool.objects.get(issuer=data["iss"], client_id=client_id, is_active=True)


def _free_email(email) -> str:
    if not isinstance(email, str) or not email or len(email) > 254:
        return ""
    return "" if get_user_model().objects.filter(email__iexact=email).exists() else email


def account_for(data: dict):
    """The local account of the launching LMS user, made now on their first launch."""
    issuer, subject = data["iss"], str(data["sub"])
    identity = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity:
        return identity.user
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:16]
    user = get_user_model()(username=f"lti-{digest}", email=_free_email(data.get("email")),
                            first_name=str(data.get("given_name") or "")[:150],
                            last_name=str(data.get("family_name") or "")[:150])
    user.set_unusable_password()
    user.save()
    Identity.objects.create(issuer=issuer, subject=subject, user=user)
    return user


def context_for(data: dict, platform: LtiTool) -> Context | None:
    """The LMS course's cohort, made on the first launch from it (None for a launch with no context)."""
    context = claim(data, "context", {})
    if not isinstance(context, dict) or not context.get("id"):
        return None
    deployment_id = claim(data, "deployment_id", "")
    found = Context.objects.select_related("cohort").filter(
        platform=platform, deployment_id=deployment_id, context_id=str(context["id"])).first()
    if found:
        return found
    title = str(context.get("title") or context.get("label") or context["id"])
    # Students join through the LMS; the cohort's invite code stays closed.
    cohort = Cohort.objects.create(name=title[:120], joining_open=False)
    return Context.objects.create(platform=platform, deployment_id=deployment_id, context_id=str(context["id"]),
                                  title=title[:255], cohort=cohort)


def join(context: Context, user, *, teacher: bool) -> bool:
    """Name `user` among the cohort's instructors, or enroll them as a student; True if newly enrolled."""
    if teacher:
        context.cohort.instructors.add(user)
        return False
    if is_teacher(user):  # a site instructor or staff account linked to an LMS student: never in class figures
        return False
    _, created = Enrollment.objects.get_or_create(cohort=context.cohort, user=user,
                                                  defaults={"source": Enrollment.Source.LTI})
    return created


@transaction.atomic
def admit(data: dict, *, teacher: bool):
    """Account, cohort and enrollment for a validated launch; returns (user, context or None)."""
    platform = platform_of(data)
    user = account_for(data)
    context = context_for(data, platform)
    if context is not None:
        join(context, user, teacher=teacher)
    return user, context


def remember_link(data: dict, context: Context, module, student=None) -> ResourceLink | None:
    """Record which module the resource link opens and its grade-service claim; `student` (None for an
    instructor's launch) is owed score posts for the module's quiz through it."""
    link = claim(data, "resource_link", {})
    if not isinstance(link, dict) or not link.get("id"):
        return None
    ags = data.get(AGS_CLAIM)
    resource_link, _ = ResourceLink.objects.update_or_create(
        context=context, resource_link_id=str(link["id"]),
        defaults={"module": module, "ags": ags if isinstance(ags, dict) else {}})
    if student is not None:
        resource_link.launched_by.add(student)
    return resource_link
