"""Narration that drives a demo: a step marker in the lesson source ties the narrated block it sits in to one
step of a demo's reference run.

In the source, a marker is a role at any point of a paragraph, list item or heading (MyST style):

    {step}`kv-cache 3` Here the cache holds the prompt and the first decoded token.

It names a demo embedded in the same lesson (`:::{demo} kv-cache`) and a 0-based step of that demo's timeline.
The demo's reference run is a recorded run of its real runner stored in the course content
(`content/runs/<demo>.json`, written by scripts/record_reference_run.py, in the shape of a shared run's trace
plus `steps`, how many timeline steps the demo makes from it). On the page the lesson's first embed of that demo
replays the reference run (like a share link), and when the narration reaches the block, the player moves the
demo's timeline to the step (static/js/narration-demo.js).

Invariants: a marker never reaches the cue text (the narrator does not read it) nor the visible text; a lesson
whose marker names a demo it does not embed, a demo without a reference run, or a step outside the run is
refused with a `ContentError` on the marker's line.
"""
from __future__ import annotations

import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import Http404, JsonResponse
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET

ROLE = "{step}"
TARGET_RE = re.compile(r"^\s*(?P<demo>[a-z0-9][a-z0-9_-]*)\s+(?P<step>\S+)\s*$")
RUNS_DIR = "runs"
EXAMPLE = "{step}`kv-cache 3`"
_incoming: ContextVar[dict[str, dict]] = ContextVar("incoming_reference_runs", default={})  # incoming_runs


class StepMarkerError(ValueError):
    """A marker that cannot be used; the message says what to write instead."""


@dataclass(frozen=True)
class StepMarker:
    demo: str
    step: int
    line: int | None


def parse_target(text: str) -> tuple[str, int]:
    """`"kv-cache 3"` → ("kv-cache", 3); StepMarkerError naming the mistake otherwise."""
    match = TARGET_RE.match(text)
    if not match:
        raise StepMarkerError(f"step marker `{text}`: write the demo's name and a step number, e.g. {EXAMPLE}")
    step = match["step"]
    if not step.isascii() or not step.isdigit() or len(step) > 6:
        raise StepMarkerError(f"step marker `{text}`: the step must be a whole number from 0 (the first step), "
                              f"not '{step[:20]}'")
    return match["demo"], int(step)


def extract(inline_token, make_slot) -> list[tuple[str, int]]:
    """Take the step markers out of an inline token's children, in place: the role's text and its code span
    become one `html_inline` child holding `make_slot(demo, step)` (a plain-text placeholder for trusted HTML,
    which `_inline_text` does not read). Returns the (demo, step) of each marker."""
    children = inline_token.children or []
    found, kept, index = [], [], 0
    while index < len(children):
        child = children[index]
        following = children[index + 1] if index + 1 < len(children) else None
        if (child.type == "text" and child.content.endswith(ROLE) and following is not None
                and following.type == "code_inline"):
            demo, step = parse_target(following.content)
            child.content = child.content[: -len(ROLE)]
            if child.content:
                kept.append(child)
            following.type, following.tag, following.markup = "html_inline", "", ""
            following.content = make_slot(demo, step)
            kept.append(following)
            found.append((demo, step))
            index += 2
            continue
        kept.append(child)
        index += 1
    if found:
        inline_token.children = kept
    return found


def runs_dir() -> Path:
    return Path(settings.CONTENT_DIR) / RUNS_DIR


@lru_cache(maxsize=32)
def _load(path: str, mtime: float) -> dict | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("events"), list) else None


@contextmanager
def incoming_runs(runs: dict[str, dict]):
    """While a course folder is being loaded, its own runs (already checked) answer `reference_run` first."""
    token = _incoming.set(runs)
    try:
        yield
    finally:
        _incoming.reset(token)


def reference_run(demo: str) -> dict | None:
    """The stored reference run of `demo` ({demo, params, header, summary, events, steps}), or None."""
    if not TARGET_RE.match(f"{demo} 0"):
        return None
    if demo in _incoming.get():
        return _incoming.get()[demo]
    path = runs_dir() / f"{demo}.json"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    data = _load(str(path), mtime)
    return data if data is not None and data.get("demo") == demo else None


def run_steps(run: dict) -> int:
    steps = run.get("steps")
    return steps if isinstance(steps, int) and steps >= 0 else 0


def check(markers: list[StepMarker], embedded: list[str], *, check_runs: bool = True) -> None:
    """Raise StepMarkerError (with the marker's line as `.line`) for the first marker that cannot work."""
    for marker in markers:
        try:
            if marker.demo not in embedded:
                shown = ", ".join(dict.fromkeys(embedded)) or "none"
                raise StepMarkerError(f"step marker `{marker.demo} {marker.step}`: this lesson embeds no demo "
                                      f"'{marker.demo}' (add ':::{{demo}} {marker.demo}'; demos here: {shown})")
            if not check_runs:
                continue
            run = reference_run(marker.demo)
            if run is None:
                raise StepMarkerError(f"step marker `{marker.demo} {marker.step}`: demo '{marker.demo}' has no "
                                      f"reference run to replay: record one into {RUNS_DIR}/{marker.demo}.json "
                                      "(scripts/record_reference_run.py)")
            steps = run_steps(run)
            if marker.step >= steps:
                raise StepMarkerError(f"step marker `{marker.demo} {marker.step}`: step {marker.step} is out of "
                                      f"range: the reference run of '{marker.demo}' has {steps} steps, "
                                      f"numbered 0 to {max(0, steps - 1)}")
        except StepMarkerError as exc:
            exc.line = marker.line
            raise


def marker_html(demo: str, step: int) -> str:
    """The marker on the page: an empty, hidden span the player reads (the block it sits in is the cue)."""
    return format_html('<span class="demo-cue" data-demo="{}" data-step="{}" hidden></span>', demo, step)


def reference_run_url(demo: str) -> str:
    return reverse("courseapp:reference_run", args=[demo])


def with_reference_run(embed_html: str, demo: str) -> str:
    """A `.demo-embed` wrapper of `demo` that also names its reference run (the demo shell replays it)."""
    opening = format_html('<div class="demo-embed" data-demo="{}"', demo)
    return embed_html.replace(opening, format_html('{} data-reference-run="{}"', opening,
                                                   reference_run_url(demo)), 1)


@require_GET
def reference_run_json(request, demo: str):
    """A demo's reference run as a shared run's trace (what `fetchSharedRun` reads); 404 when there is none."""
    run = reference_run(demo)
    if run is None:
        raise Http404(f"demo '{demo}' has no reference run")
    return JsonResponse({**run, "share_id": None})
