"""What rendering a lesson gives: the HTML with its outline, narration cues, quiz and embeds (`RenderedModule`).

Plain data, no renderer: the loader, the narration and the models read these without importing markdown-it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

WORDS_PER_MINUTE = 200


@dataclass(frozen=True)
class Cue:
    id: str
    text: str
    kind: str  # "heading" | "paragraph" | "item"

    def as_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "kind": self.kind}


@dataclass
class QuizChoice:
    text: str
    text_html: str
    correct: bool
    explanation: str
    explanation_html: str
    id: str = ""  # stable: see courseapp.quiz_ids
    generated: bool = False  # the id is not in the text yet
    line: int = 0  # body line and column where the choice's mapping starts
    column: int = 0


@dataclass
class QuizQuestion:
    text: str
    text_html: str
    choices: list[QuizChoice]
    line: int
    id: str = ""
    generated: bool = False
    column: int = 0


@dataclass
class RenderedModule:
    html: str
    outline: list[dict]
    cues: list[Cue]
    questions: list[QuizQuestion]
    demos: list[dict]
    calculators: list[str]
    word_count: int
    labs: list[dict] = field(default_factory=list)  # each `:::{lab}`'s definition (labs.definition)

    @property
    def reading_minutes(self) -> int:
        return max(1, round(self.word_count / WORDS_PER_MINUTE))

    @property
    def cue_hash(self) -> str:
        return cue_hash(self.cues)


def cue_hash(cues, voice: str = "") -> str:
    """Stable hash of what the narration says (ids and texts), optionally for one voice."""
    payload = json.dumps([voice, [[c.id, c.text] for c in cues]], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
