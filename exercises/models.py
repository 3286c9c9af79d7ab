"""Each "Run tests" a student (or an anonymous visitor) pressed: the code, its graded result, and when."""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Submission(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"  # it could not be graded (no sandbox on the worker, no worker in time): says why

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    # A UUID: the poll URL (/exercises/runs/<id>/) must not be guessable, and it is only served to its owner.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    exercise_id = models.CharField(max_length=64, db_index=True)
    # Who ran it, as demos/identity.py names owners: "u:<user id>" or "s:<keyed hash of the visitor's token>".
    owner = models.CharField(max_length=80)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="exercise_submissions")
    client = models.CharField(max_length=80, blank=True)  # keyed hash of the client address: the per-address limit
    code = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    passed = models.BooleanField(default=False)
    # The graded result as the page shows it (exercises/runner.py): hidden tests carry pass/fail and a generic
    # message only, so nothing stored here can reveal their inputs.
    results = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["owner", "created_at"]),  # the per-owner rate limit and "your last code"
            models.Index(fields=["client", "created_at"]),  # the per-address rate limit
            models.Index(fields=["status", "created_at"]),  # the queue-wide limit
            models.Index(fields=["user", "exercise_id", "passed"]),  # progress: who passed what
        ]

    def __str__(self) -> str:
        return f"{self.exercise_id} by {self.owner} ({self.status})"
