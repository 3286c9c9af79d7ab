"""What the editor's narration panel shows of a module's narration: status, queue place, progress, staleness."""
from __future__ import annotations

from courseapp.models import Module
from narration import queue as narration_queue
from narration.models import Narration


def narration_state(module: Module) -> dict:
    narration = getattr(module, "narration", None)
    if narration is None:
        return {"status": "none", "label": "Not generated", "progress": 0.0, "position": None, "busy": False,
                "error": "", "stale": False, "duration": 0.0}
    label = narration.get_status_display()
    place = narration_queue.position(narration)
    if place is not None:
        ahead = place - 1
        label = ("Queued: next to run" if not ahead else f"Queued: {ahead} job(s) ahead of it") \
            + (f" ({narration_queue.running()} running now)" if narration_queue.running() else "")
    if narration.is_stalled:
        label = "Stalled: no progress for 10 minutes (is a worker running the cpu queue?); generate again"
    return {
        "status": narration.status,
        "label": label,
        "origin": narration.get_origin_display(),
        "progress": narration.progress,
        "position": place,
        "busy": narration.is_busy,
        "error": narration.error,
        "stale": narration.is_ready and narration.is_stale,
        "duration": round(narration.duration, 1),
        "audio_url": narration.audio_url,
        "live": narration.is_ready,
        "uploaded": narration.origin == Narration.Origin.UPLOAD,
    }
