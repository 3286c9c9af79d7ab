"""A module's narration: its audio and WebVTT cues, how they were made, and its place in the queue.

The model lived in courseapp until the narration app was split off; it keeps its table (`courseapp_narration`)
and its rows.
"""
from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.urls import reverse

from courseapp.models import Module

NARRATION_STALL_AFTER = timedelta(minutes=10)


def narration_upload_to(instance: "Narration", filename: str) -> str:
    return f"narration/uploads/{instance.module.slug}/{filename}"


class Narration(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Queued"
        RUNNING = "running", "Synthesizing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Origin(models.TextChoices):
        PIPER = "piper", "Piper TTS"
        UPLOAD = "upload", "Uploaded by an instructor"

    module = models.OneToOneField(Module, on_delete=models.CASCADE, related_name="narration")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.PIPER)
    progress = models.FloatField(default=0.0, help_text="0 to 1 while synthesizing.")
    audio = models.FileField(upload_to=narration_upload_to, blank=True, max_length=255)
    vtt = models.FileField(upload_to=narration_upload_to, blank=True, max_length=255)
    duration = models.FloatField(default=0.0)
    cue_hash = models.CharField(max_length=64, blank=True, help_text="The module cues this audio speaks.")
    voice = models.CharField(max_length=100, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    # The queue, kept here (`narration.queue`): a worker runs the pending narration that comes first
    # by (priority, queued_at), so an instructor's job for one module goes ahead of a bulk regeneration.
    priority = models.PositiveSmallIntegerField(default=0, help_text="0: an instructor's job; 1: bulk.")
    queued_at = models.DateTimeField(null=True, blank=True)
    force = models.BooleanField(default=False, help_text="Synthesize again even when cached audio exists.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "courseapp_narration"  # the table it had in courseapp, kept (migration narration 0001)

    def __str__(self) -> str:
        return f"Narration of {self.module}"

    @property
    def is_ready(self) -> bool:
        return self.status == self.Status.READY and bool(self.audio) and bool(self.vtt)

    def _media_url(self, field) -> str:
        prefix = "narration/"
        if not field or not field.name.startswith(prefix):
            return field.url if field else ""
        return reverse("narration:media", args=[field.name[len(prefix):]])

    @property
    def audio_url(self) -> str:
        """Served by `narration.media` (HTTP Range support, needed to seek)."""
        return self._media_url(self.audio)

    @property
    def vtt_url(self) -> str:
        return self._media_url(self.vtt)

    @property
    def is_stale(self) -> bool:
        return self.origin == self.Origin.PIPER and self.cue_hash != self.module.cue_hash

    @property
    def is_stalled(self) -> bool:
        """Queued or running without any progress for a long time (a worker died, or none is running)."""
        from django.utils import timezone

        in_flight = self.status in (self.Status.PENDING, self.Status.RUNNING)
        return in_flight and timezone.now() - self.updated_at > NARRATION_STALL_AFTER

    @property
    def is_busy(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING) and not self.is_stalled
