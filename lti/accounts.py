"""From a validated launch to local rows: the account (by issuer and subject), the cohort (by LMS context),
the person's role in it, and the resource link (which module, which grade column).

Invariants: one account per (issuer, sub), made on the first launch with an unusable password (the LMS is how
they sign in) and never matched by email or name, so one LMS cannot claim another's account; its name (and email,
when sent and no other account has it) follow the LMS at each launch. One cohort per (registration, deployment,
context), made by the first launch from that course. The LMS decides the role in that cohort at every launch: an
Instructor or TeachingAssistant (or Administrator, ContentDeveloper) is its *section teacher* (classes/access.py)
and not its student; anyone else is its student and not its teacher. A launch never makes a course author (the
instructor permission of `manage.py createinstructor`): teaching a section needs none.
"""
from __future__ import annotations

import hashlib

from django.contrib.auth import get_user_model
from django.db import transaction
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool
from pylti1p3.roles import DesignerRole, StaffRole, StudentRole, TeacherRole, TeachingAssistantRole

from classes.access import is_teacher
from classes.models import Cohort, Enrollment

from .models import Context, Identity, ResourceLink

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"


def teaches(roles: list) -> bool:
    """A teaching role (Instructor, TeachingAssistant, Administrator, ContentDeveloper; institution faculty or
    staff)."""
    body = {CLAIM + "roles": roles if isinstance(roles, list) else []}
    return any(role(body).check() for role in (TeacherRole, TeachingAssistantRole, StaffRole, DesignerRole))


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


def _names(data: dict) -> dict[str, str]:
    """first_name/last_name from the claims: given and family names, else the full `name` split at its first
    space (one word is a first name). Empty when the LMS sent no name: what the account has is kept."""
    given, family, full = (str(data.get(key) or "").strip() for key in ("given_name", "family_name", "name"))
    if not given and not family and full:
        given, _, family = full.partition(" ")
    if not given and not family:
        return {}
    return {"first_name": given[:150], "last_name": family.strip()[:150]}


def _refresh(user, data: dict) -> None:
    """The account's name and email as the LMS sends them now (an email another account has is not taken)."""
    changes = _names(data)
    email = data.get("email")
    if isinstance(email, str) and email and email.lower() != user.email.lower():
        if _free_email(email):
            changes["email"] = email
    changes = {field: value for field, value in changes.items() if getattr(user, field) != value}
    if changes:
        for field, value in changes.items():
            setattr(user, field, value)
        user.save(update_fields=list(changes))


def account_for(data: dict):
    """The local account of the launching LMS user, made now on their first launch; their name and email are
    brought up to date with the claims."""
    issuer, subject = data["iss"], str(data["sub"])
    identity = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity:
        _refresh(identity.user, data)
        return identity.user
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:16]
    user = get_user_model()(username=f"lti-{digest}", email=_free_email(data.get("email")), **_names(data))
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
    """The person's role in the cohort as the LMS gives it now: a teacher (and no longer its student), or a
    student (and no longer its teacher). Returns True if newly enrolled, or active again after having left."""
    cohort = context.cohort
    if teacher:
        cohort.instructors.add(user)
        Enrollment.objects.filter(cohort=cohort, user=user).delete()  # their work stays with their account
        return False
    cohort.instructors.remove(user)
    if is_teacher(user):  # a site author or staff account linked to an LMS student: never in class figures
        return False
    enrollment, created = Enrollment.objects.get_or_create(cohort=cohort, user=user,
                                                           defaults={"source": Enrollment.Source.LTI})
    if not enrollment.active:  # back in the LMS course after having left it (lti/roster.py)
        Enrollment.objects.filter(pk=enrollment.pk).update(active=True, left_at=None)
        return True
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
