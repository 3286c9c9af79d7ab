"""Line diffs between two versions of a module file, numbered on both sides, for the authoring pages."""
from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass

from .content import serialize_module


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "hunk", "context", "removed" or "added"
    text: str
    old_line: int | None = None
    new_line: int | None = None

    @property
    def marker(self) -> str:
        return {"removed": "−", "added": "+"}.get(self.kind, "")


def file_text(front_matter: dict, source: str) -> str:
    return serialize_module(front_matter, source)


def content_digest(text: str) -> str:
    """Names one proposed version: a confirmation given for it does not carry over to a later edit."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def diff_rows(old: str, new: str, context: int = 3) -> list[DiffRow]:
    """Changed lines with `context` lines around them, numbered in both versions; [] when equal."""
    a, b = old.splitlines(), new.splitlines()
    rows: list[DiffRow] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        rows.append(DiffRow("hunk", f"Lines {first[1] + 1}–{last[2]} → {first[3] + 1}–{last[4]}"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [DiffRow("context", a[i], i + 1, j1 + k + 1) for k, i in enumerate(range(i1, i2))]
                continue
            rows += [DiffRow("removed", a[i], old_line=i + 1) for i in range(i1, i2)]
            rows += [DiffRow("added", b[j], new_line=j + 1) for j in range(j1, j2)]
    return rows


def diff_stats(rows: list[DiffRow]) -> tuple[int, int]:
    return sum(r.kind == "added" for r in rows), sum(r.kind == "removed" for r in rows)
