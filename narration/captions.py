"""Fix a narration's caption in place: one WebVTT cue's text changes, its timing and the audio do not.

The edited captions are written to a new file (a fresh server-chosen name, so no browser or cache keeps the
old text) and the narration points at it; the previous file is left alone, since synthesized captions are
shared by content hash. An edited cue is highlighted as a whole (its per-sentence timestamps belonged to the
old text).
"""
from __future__ import annotations

from dataclasses import replace

from django.core.files.base import ContentFile
from django.db import transaction

from .files import stored_name
from .models import Narration
from .synthesis import TimedCue, VTTError, parse_vtt, write_vtt

MAX_CAPTION_CHARS = 2000


def cues_of(record: Narration) -> list[TimedCue]:
    """The narration's cues as students get them; [] when it has no readable captions."""
    if not record.vtt:
        return []
    try:
        with record.vtt.open("rb") as handle:
            return parse_vtt(handle.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, VTTError):
        return []


@transaction.atomic
def edit_caption(record: Narration, cue_id: str, text: str) -> TimedCue:
    """Replace cue `cue_id`'s text; ValueError (saying what is wrong) leaves everything as it was."""
    text = " ".join(text.split())
    if not text:
        raise ValueError("A caption cannot be empty: write what the narration says there.")
    if len(text) > MAX_CAPTION_CHARS:
        raise ValueError(f"A caption holds at most {MAX_CAPTION_CHARS} characters.")
    cues = cues_of(record)
    index = next((i for i, cue in enumerate(cues) if cue.id == cue_id), None)
    if index is None:
        raise ValueError(f"This narration has no caption '{cue_id}'.")
    cues[index] = replace(cues[index], text=text, sentences=())
    record.vtt.save(stored_name(".vtt"), ContentFile(write_vtt(cues).encode("utf-8")), save=False)
    record.save(update_fields=["vtt", "updated_at"])
    return cues[index]
