"""Every demo run and every event it produced, so runs can be resumed, replayed and audited."""
from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import models


def new_share_id() -> str:
    """An unguessable public id for a run's share link (96 random bits, URL-safe; never sequential)."""
    return secrets.token_urlsafe(12)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        ERROR = "error"

    FINAL = (Status.DONE, Status.CANCELLED, Status.ERROR)
    ACTIVE = (Status.QUEUED, Status.RUNNING)  # holding or waiting for a worker slot

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    demo = models.CharField(max_length=64, db_index=True)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # Who may see it: "u:<user id>", "s:<session token hash>" or "a:<client address hash>" (a session-less socket).
    owner = models.CharField(max_length=80, db_index=True)
    client = models.CharField(max_length=64, blank=True)  # client address (inferencelab/client_address.py): limits
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=64, blank=True)
    engine_version = models.CharField(max_length=64, blank=True)
    cache_key = models.CharField(max_length=64, blank=True, db_index=True)
    deterministic = models.BooleanField(default=False)
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    # Why a replay was served instead of a live run: "requested" (the student asked) or "busy" (no free slot).
    replay_reason = models.CharField(max_length=16, blank=True)
    # Where the numbers were measured (set by the worker when it claims the run).
    device = models.CharField(max_length=32, blank=True)
    dtype = models.CharField(max_length=32, blank=True)
    # The share link's id (/demos/runs/<share_id>/): a finished run can be reopened read-only by anyone with it.
    share_id = models.CharField(max_length=32, unique=True, default=new_share_id, editable=False)
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

    def header(self) -> dict:
        """What stands behind this run's numbers (the `header` frame, docs/protocol.md): live or a replay, and
        the model, device, dtype, engine version and time of the run that measured them (a replay: the
        original's). Reads `replay_of` (a query unless it was loaded): call it in a thread from async code."""
        source = self.event_source
        measured = source.started_at or source.created_at
        frame = {"type": "header", "run_id": str(self.id), "demo": self.demo,
                 "mode": "replay" if self.replay_of_id else "live", "model": source.model or None,
                 "device": source.device or None, "dtype": source.dtype or None,
                 "engine_version": source.engine_version or None,
                 "measured_at": measured.isoformat() if measured else None}
        if self.replay_of_id:
            frame["replay_reason"] = self.replay_reason or "requested"
        return frame

    def public_header(self) -> dict:
        """The header as anyone with the share link sees it: what measured the numbers, not which run row."""
        return {k: v for k, v in self.header().items() if k != "run_id"}

    def public_summary(self) -> dict:
        """The summary without what only its owner and staff may know (which worker process ran it)."""
        return public_summary(self.summary)


# Summary fields that name the machine and process behind a run: kept for its owner's `done` frame and the
# dashboard, left out of everything another visitor can open (share links, replays of someone else's run).
PRIVATE_SUMMARY_KEYS = frozenset({"worker"})


def public_summary(summary: dict | None) -> dict:
    return {k: v for k, v in (summary or {}).items() if k not in PRIVATE_SUMMARY_KEYS}


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
