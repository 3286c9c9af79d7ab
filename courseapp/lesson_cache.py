"""The parts of a lesson page that are the same for every visitor, rendered once per module version.

A lesson page is mostly the module's stored HTML with this server's figures filled in (`serverprofile.figures`),
its table of contents split around the quiz, and its calculators' scripts. None of that depends on who asks, so
it is built once and kept in Django's cache under a key made of what it is built from: the module's id and
`updated_at` (every save bumps it: an edit, a publish, a restore, an import) and, for a lesson that shows this
server's figures, the newest machine profile's id. A new version is a new key; an old one simply ages out.

What differs per visitor (progress, the quiz's order and state, the CSRF token, narration, due dates) is never
cached here: the view renders it around these parts on every request. Issue 38: twenty visitors looping on lesson
pages must not slow a live run.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.staticfiles import finders
from django.core.cache import cache
from django.templatetags.static import static

from serverprofile import figures as server_figures

from .models import Module

CACHE_SECONDS = 3600
BUILDS = {"count": 0}  # how many times parts were built rather than read from the cache (tests count them)


@dataclass(frozen=True)
class LessonParts:
    lesson_before: str  # the lesson's HTML before the quiz, figures filled in
    lesson_after: str
    outline_before: list[dict]  # the table of contents above "Check yourself"
    outline_after: list[dict]
    calculator_scripts: list[str]


def _figures_version(module: Module) -> str:
    """Which machine profile the filled-in figures come from ("-" for a lesson that shows none)."""
    if not server_figures.PLACEHOLDER_RE.search(module.html):
        return "-"
    row = server_figures.latest_profile()
    return f"p{row.pk}" if row is not None else "recorded"


def _outline_parts(outline: list[dict], lesson_after: str) -> tuple[list[dict], list[dict]]:
    """The table of contents split around the quiz, so "Check yourself" is listed where the quiz is."""
    after_ids = {item["id"] for item in outline if f'id="{item["id"]}"' in lesson_after}
    return ([item for item in outline if item["id"] not in after_ids],
            [item for item in outline if item["id"] in after_ids])


def _build(module: Module) -> LessonParts:
    BUILDS["count"] += 1
    lesson_before, lesson_after = (server_figures.fill(part) for part in module.html_parts())
    outline_before, outline_after = _outline_parts(module.outline, lesson_after)
    scripts = [static(f"js/calculators/{name}.js") for name in module.calculators
               if finders.find(f"js/calculators/{name}.js")]
    return LessonParts(lesson_before, lesson_after, outline_before, outline_after, scripts)


def lesson_parts(module: Module) -> LessonParts:
    key = f"lesson-parts:{module.pk}:{module.updated_at.isoformat()}:{_figures_version(module)}"
    parts = cache.get(key)
    if parts is None:
        parts = _build(module)
        cache.set(key, parts, CACHE_SECONDS)
    return parts
