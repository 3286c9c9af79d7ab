"""Narration jobs: the database bookkeeping around `narration.synthesize`, and queueing it (and MP3 re-encoding) on
the `cpu` workers, whose tasks (workers/narration.py) call back into `run_narration` and `convert_to_mp3`."""
from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.utils import timezone

from courseapp.models import Module
from demos.runstate import CPU_QUEUE
from inferencelab.celery import app

from . import synthesis as narration, audio as narration_audio, queue as narration_queue
from .files import stored_name
from .models import Narration

logger = logging.getLogger(__name__)

PROGRESS_WRITE_INTERVAL_S = 0.5
# The `cpu` workers' tasks (workers/narration.py), by name: the web side sends them without importing the worker.
GENERATE_TASK = "courseapp.generate_narration"
CONVERT_TASK = "courseapp.convert_narration"


def send(task: str, args: list, kwargs: dict | None = None):
    """Queue `task` on the `cpu` workers; raises what the broker client raises when it cannot be reached."""
    return app.send_task(task, args=args, kwargs=kwargs or {}, queue=CPU_QUEUE, retry=False)


def run_narration(module_id: int, *, force: bool = False) -> Narration:
    """Synthesize (or reuse cached audio for) a module's narration, updating `Narration.progress`."""
    module = Module.objects.get(pk=module_id)
    record, _ = Narration.objects.get_or_create(module=module)
    record.status, record.progress, record.error = Narration.Status.RUNNING, 0.0, ""
    record.save(update_fields=["status", "progress", "error", "updated_at"])
    last_write = [0.0]

    def report(fraction: float) -> None:
        now = time.monotonic()
        if fraction < 1 and now - last_write[0] < PROGRESS_WRITE_INTERVAL_S:
            return
        last_write[0] = now
        Narration.objects.filter(pk=record.pk).update(progress=round(fraction, 3), updated_at=timezone.now())

    try:
        result = narration.synthesize(
            module.cues, settings.MEDIA_ROOT / narration.NARRATION_DIR, progress=report, force=force
        )
    except Exception as exc:  # recorded for the authoring UI, then re-raised for the worker log
        Narration.objects.filter(pk=record.pk).update(status=Narration.Status.FAILED, error=str(exc)[:2000])
        raise
    record.refresh_from_db()
    record.status = Narration.Status.READY
    record.origin = Narration.Origin.PIPER
    record.progress = 1.0
    record.audio.name = f"{narration.NARRATION_DIR}/{result.audio_path.name}"
    record.vtt.name = f"{narration.NARRATION_DIR}/{result.vtt_path.name}"
    record.duration = result.duration
    record.cue_hash = module.cue_hash
    record.voice = narration.VOICE_NAME
    record.save()
    logger.info("Narration of %s %s (%.1f s)", module.slug, "reused" if result.cached else "synthesized",
                result.duration)
    return record


def enqueue_narration(module: Module, *, force: bool = False,
                      priority: int = narration_queue.INSTRUCTOR) -> Narration:
    """Queue synthesis on the `cpu` workers, at `priority` (an instructor's job goes ahead of `BULK` ones);
    a broker outage is recorded on the narration, not raised."""
    record, _ = Narration.objects.get_or_create(module=module)
    record.status, record.progress, record.error = Narration.Status.PENDING, 0.0, ""
    record.priority, record.force, record.queued_at = priority, force, timezone.now()
    record.save()
    try:
        result = send(GENERATE_TASK, [module.pk], {"force": force})
    except Exception as exc:  # kombu raises a variety of connection errors
        record.status = Narration.Status.FAILED
        record.error = (f"The task queue is not reachable ({exc.__class__.__name__}). Start the workers "
                        f"(`make run`) or run `python manage.py narrate {module.slug}`.")
        record.save(update_fields=["status", "error", "updated_at"])
        return record
    record.task_id = result.id or ""
    record.save(update_fields=["task_id"])
    return record


def convert_to_mp3(record: Narration) -> tuple[int, int] | None:
    """Re-encode a narration stored as WAV (before MP3, or an upload kept as WAV) as MP3 beside it, point the
    record at it and delete the WAV once nothing else uses it. Returns (bytes before, bytes after), or None
    when the audio is not WAV. Raises ValueError (record unchanged) for a WAV the encoder cannot read."""
    if not record.audio or not record.audio.name.lower().endswith(".wav"):
        return None
    source = Path(record.audio.path)
    name = record.audio.name[: -len(".wav")] + narration_audio.EXTENSION
    target = source.with_name(Path(name).name)
    narration_audio.wav_to_mp3(source, target)
    before, after = source.stat().st_size, target.stat().st_size
    old = record.audio.name
    Narration.objects.filter(audio=old).update(audio=name, updated_at=timezone.now())
    record.audio.name = name
    source.unlink(missing_ok=True)
    return before, after


def is_wav(record: Narration | None) -> bool:
    return record is not None and record.is_ready and record.audio.name.lower().endswith(".wav")


def _wav_as_mp3(module: Module, wav, scratch: Path) -> Path | None:
    """The uploaded WAV encoded as MP3 in `scratch`, or None when the encoder cannot read it."""
    encoded = scratch / f"upload{narration_audio.EXTENSION}"
    wav.seek(0)
    try:
        narration_audio.wav_to_mp3(wav, encoded)
    except ValueError as exc:
        logger.info("Uploaded WAV for %s kept as WAV: %s", module.slug, exc)
        return None
    finally:
        wav.seek(0)
    return encoded


@transaction.atomic
def attach_upload(module: Module, audio, audio_extension: str, vtt, duration: float) -> Narration:
    """Use instructor-provided audio + WebVTT instead of synthesized speech.

    Stored under names the server chooses (`files.stored_name`), with the extension of the audio
    container its bytes show, never the uploaded name: that is what the media view serves and types by.
    A WAV is stored as MP3 (`audio`), a tenth of the bytes; one the encoder cannot read (floating
    point samples, say) is kept as the WAV it is, which browsers play too.
    """
    record, _ = Narration.objects.get_or_create(module=module)
    with tempfile.TemporaryDirectory() as scratch:
        encoded = _wav_as_mp3(module, audio, Path(scratch)) if audio_extension == ".wav" else None
        if encoded is None:
            record.audio.save(stored_name(audio_extension), audio, save=False)
        else:
            with encoded.open("rb") as handle:
                record.audio.save(stored_name(narration_audio.EXTENSION), File(handle), save=False)
    record.vtt.save(stored_name(".vtt"), vtt, save=False)
    record.status, record.origin, record.progress = Narration.Status.READY, Narration.Origin.UPLOAD, 1.0
    record.duration, record.cue_hash, record.voice, record.error = duration, module.cue_hash, "", ""
    record.save()
    return record
