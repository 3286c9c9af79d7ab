"""The `cpu` workers' narration tasks (sent by narration.jobs by name, always to the `cpu` queue)."""
from __future__ import annotations

import logging

from celery import shared_task

from narration import queue as narration_queue
from narration.jobs import CONVERT_TASK, GENERATE_TASK, convert_to_mp3, run_narration
from narration.models import Narration

logger = logging.getLogger(__name__)


@shared_task(name=GENERATE_TASK, ignore_result=True)
def generate_narration(module_id: int, force: bool = False) -> None:
    """A ticket: runs the pending narration that comes first (`narration_queue`), which is `module_id`'s
    unless an instructor's job or an older one is waiting; nothing when no job is pending any more."""
    record = narration_queue.claim_next()
    if record is not None:
        run_narration(record.module_id, force=record.force)


@shared_task(name=CONVERT_TASK, ignore_result=True)
def convert_narration(narration_id: int) -> None:
    """`convert_to_mp3` on the `cpu` workers (what `narrate --queue`, run by `make run`, asks for)."""
    record = Narration.objects.filter(pk=narration_id).first()
    if record is None:
        return
    try:
        sizes = convert_to_mp3(record)
    except ValueError as exc:
        logger.warning("Narration of %s kept as WAV: %s", record.module.slug, exc)
        return
    if sizes:
        logger.info("Narration of %s re-encoded: %d bytes of WAV → %d bytes of MP3", record.module.slug, *sizes)
