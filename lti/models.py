"""What the LTI 1.3 tool remembers about the platforms (LMSs) that launch it.

Registered platforms and their deployments are the library's models (`pylti1p3`'s `lti1p3_tool_config` app:
`LtiTool` = one platform registration, issuer + client id, with its deployment ids and the tool key it signs
with; `LtiToolKey` = this install's key pair, made by `lti/keys.py`). This module adds what a launch leaves
behind: which local account an LMS user is (`Identity`, by issuer and subject), which cohort an LMS course is
(`Context`), which module and grade column a resource link is (`ResourceLink`), and every score owed to a
platform until it has accepted it (`ScorePost`).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from classes.models import Cohort
from courseapp.models import Module

from .origins import parse_origins


class Identity(models.Model):
    """An LMS user (`sub` as issued by `issuer`) is this local account, for good: made on their first launch."""

    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lti_identities")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_account_per_lms_user")]
        verbose_name_plural = "identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} = {self.user}"


class Context(models.Model):
    """An LMS course (context) within one deployment, run here as a cohort."""

    platform = models.ForeignKey(LtiTool, on_delete=models.CASCADE, related_name="+")
    deployment_id = models.CharField(max_length=255)
    context_id = models.CharField(max_length=255)
    title = models.CharField(max_length=255, blank=True)
    cohort = models.OneToOneField(Cohort, on_delete=models.CASCADE, related_name="lti_context")
    # Names and Role Provisioning (lti/roster.py): the class list's address from the latest launch carrying it,
    # when the `cpu` worker's sweep reads it next, and what the last reading gave.
    memberships_url = models.URLField(max_length=1000, blank=True)
    roster_synced_at = models.DateTimeField(null=True, blank=True, help_text="The class list's last reading.")
    roster_next_at = models.DateTimeField(null=True, blank=True, db_index=True)
    roster_claimed_until = models.DateTimeField(null=True, blank=True)
    roster_answer = models.TextField(blank=True, help_text="What the last reading of the class list gave, in words.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["platform", "deployment_id", "context_id"],
                                               name="one_cohort_per_lms_context")]

    def __str__(self) -> str:
        return f"{self.title or self.context_id} ({self.platform.title})"


class ResourceLink(models.Model):
    """A link placed in an LMS course that opens `module`; `ags` is the launch's grade-service claim (its
    `lineitem` is the grade column scores go to), refreshed on every launch; `launched_by` are the students
    who opened it (instructors never), each owed a score post when they pass the module's quiz."""

    context = models.ForeignKey(Context, on_delete=models.CASCADE, related_name="resource_links")
    resource_link_id = models.CharField(max_length=255)
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="+")
    ags = models.JSONField(default=dict, blank=True)
    launched_by = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="+", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["context", "resource_link_id"], name="one_row_per_link")]

    def __str__(self) -> str:
        return f"{self.module} in {self.context}"

    @property
    def lineitem(self) -> str:
        return self.ags.get("lineitem", "") if isinstance(self.ags, dict) else ""


class ScorePost(models.Model):
    """A score owed to a platform's grade column. Made in the same transaction as the attempt, then sent by a job
    on the `cpu` workers (lti/scores.py). A platform that is down or busy gets it again after a growing pause, from
    the `cpu` worker's own sweep, until it accepts (`sent`) or the tool gives up (`failed`: a refusal no retry can
    change, or too many tries); a teacher resends a failed one from the gradebook."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"
        SUPERSEDED = "superseded", "Superseded by a newer score"

    resource_link = models.ForeignKey(ResourceLink, on_delete=models.CASCADE, related_name="score_posts")
    identity = models.ForeignKey(Identity, on_delete=models.CASCADE, related_name="score_posts")
    activity = models.CharField(max_length=80, default="quiz", help_text='"quiz", "lab:<key>" or "exercise:<id>".')
    score_given = models.PositiveIntegerField()
    score_maximum = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    tries = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    answer = models.TextField(blank=True, help_text="The platform's last answer (status and body), or why none.")
    next_try_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                       help_text="When the worker's sweep sends it, if still pending.")
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="Being sent by a worker until then.")
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.score_given}/{self.score_maximum} for {self.identity.subject} ({self.state})"


class Embedding(models.Model):
    """Where a platform shows the tool in a frame: `origins` (one per line, scheme://host[:port]) may frame the
    pages of a session its launch began, besides the registration's own issuer and login-URL origins. Canvas
    needs the school's Canvas address here (its issuer and login URL are Instructure's, not the school's)."""

    platform = models.OneToOneField(LtiTool, on_delete=models.CASCADE, related_name="embedding")
    origins = models.TextField(blank=True, validators=[parse_origins], help_text=(
        "Origins that show the tool in a frame, one per line (e.g. https://school.instructure.com)."))

    def __str__(self) -> str:
        return f"Frame origins of {self.platform.title}"


class RegistrationLink(models.Model):
    """A single-use link an administrator hands to an LMS for LTI Dynamic Registration (lti/registration.py): only
    its hash is kept; it registers one platform, before `expires_at`."""

    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    platform = models.ForeignKey(LtiTool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    def __str__(self) -> str:
        return f"Registration link made {self.created_at:%Y-%m-%d %H:%M}" + (" (used)" if self.used_at else "")
