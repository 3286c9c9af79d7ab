"""An exercise's widget (prompt, editor, "Run tests", results) as HTML: its own page uses it, and so can a lesson.

`exercise_embed_html(id)` is what the lesson renderer calls for `:::{exercise} <id>`: the widget with its stylesheet
and script tags (a module script runs once however many widgets a page holds). Given the request, the form
carries its CSRF token; without one (a lesson cached for everyone), the script sends the `csrftoken` cookie's.
"""
from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from . import catalog, live_draft, live_run
from .catalog import Exercise

LIVE_RUNS = {live_run.EXERCISE_ID: live_run.SPEC, live_draft.EXERCISE_ID: live_draft.SPEC}

# Raw HTML off: the prompt is Markdown only (authored in code, but nothing it holds needs HTML).
_markdown = MarkdownIt("commonmark", {"html": False, "typographer": False})


def prompt_html(exercise: Exercise) -> SafeString:
    return mark_safe(_markdown.render(exercise.prompt))  # noqa: S308 - markdown-it escapes (html disabled)


def widget_context(exercise: Exercise, code: str | None = None, standalone: bool = False) -> dict:
    dom_id = f"exercise-{exercise.id}"
    # Passing code of these exercises drives a live run (exercises/live_run.py, live_draft.py): its spec, for the form.
    live = LIVE_RUNS[exercise.id].describe() if exercise.id in LIVE_RUNS else None
    return {"exercise": exercise, "prompt_html": prompt_html(exercise), "code": exercise.starter if code is None
            else code, "standalone": standalone, "dom_id": dom_id, "starter_id": f"{dom_id}-starter",
            "live": live, "live_id": f"{dom_id}-live", "live_spec_id": f"{dom_id}-live-spec"}


def exercise_embed_html(exercise_id: str, request=None, code: str | None = None) -> SafeString:
    """The widget for `exercise_id`; raises KeyError for an unknown id (the renderer reports it to the author)."""
    exercise = catalog.get(exercise_id)
    if exercise is None:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(sorted(catalog.EXERCISES))}")
    return mark_safe(render_to_string("exercises/_widget.html", widget_context(exercise, code), request=request))
