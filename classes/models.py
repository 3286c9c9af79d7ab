"""Classes: cohorts (sections) of students with their own instructors, due dates per module, announcements.

A cohort's *students* are its enrollments; its *instructors* are accounts with the course's instructor
permission (courseapp/instructors.py) named on the cohort. An instructor manages only the cohorts that name
them (superusers manage all), so instructors need no admin rights. An account that can author the course
(staff, superuser or instructor) is never enrolled as a student, which keeps teachers out of class figures.
"""
from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse

from courseapp.models import Module

# No 0/O or 1/I/L: a code read aloud or copied from a slide is typed right the first time.
INVITE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
INVITE_LENGTH = 10


def new_invite_code() -> str:
    return "".join(secrets.choice(INVITE_ALPHABET) for _ in range(INVITE_LENGTH))


class CohortQuerySet(models.QuerySet):
    def taught_by(self, user):
        """The cohorts `user` may manage: those naming them as instructor (every cohort for a superuser)."""
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(instructors=user)


class Cohort(models.Model):
    name = models.CharField(max_length=120)
    instructors = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="taught_cohorts")
    invite_code = models.CharField(max_length=16, unique=True, default=new_invite_code, editable=False)
    joining_open = models.BooleanField(default=True, help_text="Whether the invite code still enrolls people.")
    created_at = models.DateTimeField(auto_now_add=True)
    # Archived: the term is over. Listed apart, joining closed; its students, work and grades stay.
    archived = models.BooleanField(default=False)
    time_zone = models.CharField(max_length=64, blank=True, help_text=(
        "IANA name (e.g. Europe/Paris) its due dates are set and shown in; blank: the site's."))

    objects = CohortQuerySet.as_manager()

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("classes:cohort", args=[self.pk])

    def join_path(self) -> str:
        return reverse("classes:join", args=[self.invite_code])


class Enrollment(models.Model):
    class Source(models.TextChoices):
        INVITE = "invite", "Invite code"
        IMPORT = "import", "Added by an instructor"
        LTI = "lti", "Launched from the LMS"

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="enrollments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="enrollments")
    source = models.CharField(max_length=16, choices=Source.choices)
    joined_at = models.DateTimeField(auto_now_add=True)
    # The LMS no longer lists them in its course (lti/roster.py): kept, with their work, and shown as having left.
    active = models.BooleanField(default=True, help_text="False once the LMS's class list no longer has them.")
    left_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cohort", "user"], name="one_enrollment_per_cohort")]
        ordering = ["user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.cohort}"


class DueDate(models.Model):
    """When a module should be done by a cohort's students (done: `ModuleProgress.completed_at` is set)."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="due_dates")
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="due_dates")
    due_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cohort", "module"], name="one_due_date_per_module")]
        ordering = ["due_at", "pk"]

    def __str__(self) -> str:
        return f"{self.module} due {self.due_at:%Y-%m-%d %H:%M} for {self.cohort}"


class DueDateExtension(models.Model):
    """One student's own due date for a module (an extension granted by the cohort's teacher)."""

    due_date = models.ForeignKey(DueDate, on_delete=models.CASCADE, related_name="extensions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="due_extensions")
    due_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["due_date", "user"], name="one_extension_per_student")]
        ordering = ["due_at", "pk"]

    def __str__(self) -> str:
        return f"{self.user} has until {self.due_at:%Y-%m-%d %H:%M} for {self.due_date.module}"


class Announcement(models.Model):
    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="announcements")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    title = models.CharField(max_length=200)
    body = models.TextField(max_length=5000, help_text="Plain text; blank lines separate paragraphs.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.title


class ProvisionedAccount(models.Model):
    """An account a roster import created for a student who had none. Only such an account gets set-password
    links, from its cohort's instructors, and only until its owner first signs in or sets a password: an account
    that existed before (its own sign-in, an LTI identity) never gets one from anybody but its owner."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provisioned")
    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="provisioned_accounts")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} (made for {self.cohort})"


class Invitation(models.Model):
    """An instructor asked an existing account to join a cohort. Until its owner accepts, in their own session,
    nothing is enrolled and the instructor sees only the username they typed."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cohort_invitations")
    username_typed = models.CharField(max_length=150)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cohort", "user"], name="one_invitation_per_cohort")]
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.username_typed} invited to {self.cohort}"
