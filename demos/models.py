"""Every demo run and every event it produced, so runs can be resumed, replayed and audited."""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        ERROR = "error"

    FINAL = (Status.DONE, Status.CANCELLED, Status.ERROR)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    demo = models.CharField(max_length=64, db_index=True)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # Who may see it: "u:<user id>" or "s:<session key>" (or "c:<connection>" for a session-less socket).
    owner = models.CharField(max_length=80, db_index=True)
    client = models.CharField(max_length=64, blank=True)  # client address, for session-less limits
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=64, blank=True)
    engine_version = models.CharField(max_length=64, blank=True)
    cache_key = models.CharField(max_length=64, blank=True, db_index=True)
    deterministic = models.BooleanField(default=False)
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    worker = models.CharField(max_length=200, blank=True)
    n_events = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "status"]), models.Index(fields=["cache_key", "status"])]

    def __str__(self) -> str:
        return f"{self.demo} {self.id} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def event_source(self) -> "Run":
        """Where this run's events are stored: a replay reads the original's."""
        return self.replay_of if self.replay_of_id else self


class RunEvent(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    # Seconds since the run started when the worker produced the event (replays are paced by it).
    t = models.FloatField(default=0.0)
    type = models.CharField(max_length=32, blank=True)
    event = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="demos_runevent_run_seq_unique")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"
