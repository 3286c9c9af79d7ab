"""A module's narration as a student meets it while the audio is still being made: its state, one sentence
for the page, and how much of the course is narrated already (a fresh server generates every module's audio
in the background for its first minutes)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db.models import Count, Q
from django.utils import timezone

from courseapp.models import Module

from .models import NARRATION_STALL_AFTER, Narration


@dataclass(frozen=True)
class NarrationStatus:
    state: str  # "ready": the player can show; "busy": queued or being synthesized; "missing": neither
    message: str  # what follows "Audio version of this page:"
    progress: float | None  # this page's synthesis, 0–1, while it runs
    ready: int  # modules of the course whose audio is ready
    total: int

    def as_dict(self) -> dict:
        return asdict(self)


def _detail(narration: Narration) -> str:
    if narration.status == Narration.Status.RUNNING and narration.progress > 0:
        return f"{round(narration.progress * 100)}% done"
    return "queued" if narration.status == Narration.Status.PENDING else "starting"


def _waiting_in_a_moving_queue(narration: Narration) -> bool:
    """Queued longer than the stall limit, but behind other modules' narration that is still progressing
    (a fresh server narrating the whole course on two workers): still coming, not stuck."""
    if narration.status != Narration.Status.PENDING:
        return False
    recent = timezone.now() - NARRATION_STALL_AFTER
    return Narration.objects.filter(status=Narration.Status.RUNNING, updated_at__gte=recent).exists()


def course_counts(user) -> tuple[int, int]:
    """(modules whose audio is ready, modules) of the course `user` sees, in one query."""
    ready = Q(narration__status=Narration.Status.READY) & ~Q(narration__audio="") & ~Q(narration__vtt="")
    counts = Module.objects.visible_to(user).aggregate(total=Count("pk"), ready=Count("pk", filter=ready))
    return counts["ready"], counts["total"]


def narration_status(narration: Narration | None, user) -> NarrationStatus:
    """The state of a module's `narration` (None: it has none) for its page; `user` decides which modules
    count as the course."""
    if narration is not None and narration.is_ready:
        return NarrationStatus("ready", "ready.", None, 0, 0)
    if narration is None or not (narration.is_busy or _waiting_in_a_moving_queue(narration)):
        return NarrationStatus("missing", "Narration not generated yet.", None, 0, 0)
    ready, total = course_counts(user)
    running = narration.status == Narration.Status.RUNNING
    return NarrationStatus(
        "busy", f"being generated now ({_detail(narration)}). Narration is ready for {ready} of {total} "
                f"module{'' if total == 1 else 's'}. "
                "The player appears here when this page's audio is ready.",
        narration.progress if running else None, ready, total)
