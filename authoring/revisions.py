"""Module revisions: the history of what authors wrote, diffs between any two versions, and restore.

Revisions are kept by django-simple-history (`Module.history`): one per save that changed the front matter
or the source, with its author and time. A version is compared as the file `exportcourse` would write
(front matter + Markdown), so a diff shows exactly what an export and a `git diff` would show.
"""
from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from courseapp.forms import ModuleForm
from courseapp.input_limits import parse_digits
from courseapp.instructors import instructor_required
from courseapp.loader import authored, save_module, stored_authored
from courseapp.models import Module, Track

from .diffs import DiffBudget, content_digest, diff_notice, diff_rows, diff_stats, file_text

CURRENT = "current"


def revision_front_matter(revision, track_slugs: dict[int, str] | None = None) -> dict:
    """A historical row's front matter, in the shape `authored` gives a live module."""
    if track_slugs is None:
        track_slugs = dict(Track.objects.filter(pk=revision.track_id).values_list("pk", "slug"))
    return {
        "title": revision.title, "short_title": revision.short_title, "slug": revision.slug,
        "track": track_slugs.get(revision.track_id),
        "order": revision.order, "prerequisites": list(revision.prerequisites or []), "summary": revision.summary,
        "draft": revision.draft,
    }


def revision_text(revision, track_slugs: dict[int, str] | None = None) -> str:
    return file_text(revision_front_matter(revision, track_slugs), revision.source)


def _revisions(module: Module) -> list:
    return list(module.history.select_related("history_user").order_by("-history_date", "-history_id"))


@require_GET
@instructor_required
def module_history(request, slug: str):
    """Every revision, newest first, each with what it changed against the one before.

    All the page's diffs share one work budget, so a long history of repetitive drafts costs no more than one.
    """
    module = get_object_or_404(Module, slug=slug)
    revisions = _revisions(module)
    rows = []
    track_slugs = dict(Track.objects.values_list("pk", "slug"))
    texts = [revision_text(r, track_slugs) for r in revisions]
    budget = DiffBudget()
    for index, revision in enumerate(revisions):
        previous = texts[index + 1] if index + 1 < len(texts) else ""
        changes = diff_rows(previous, texts[index], context=0, budget=budget)
        added, removed = diff_stats(changes)
        rows.append({"revision": revision, "added": added, "removed": removed, "notice": diff_notice(changes),
                     "number": len(revisions) - index,
                     "author": revision.history_user.get_username() if revision.history_user else "content files",
                     "reason": revision.history_change_reason or "", "is_latest": index == 0})
    return render(request, "authoring/history.html", {
        "module": module, "rows": rows,
        "default_from": revisions[1].history_id if len(revisions) > 1 else None,
    })


def _version(module: Module, key: str) -> tuple[str, str]:
    """(label, file text) of a version named by revision id or "current"; 404 for anything else."""
    if key == CURRENT:
        return "the current version", file_text(*authored(module))
    history_id = parse_digits(key)  # 5,000 digits are no revision, and no reason to parse them
    if history_id is None:
        raise Http404("No such revision.")
    revision = module.history.filter(history_id=history_id).first()
    if revision is None:
        raise Http404("No such revision of this module.")
    return f"revision of {revision.history_date:%Y-%m-%d %H:%M}", revision_text(revision)


@require_GET
@instructor_required
def module_diff(request, slug: str):
    """The diff between two versions: `?from=<revision id>&to=<revision id | current>`."""
    module = get_object_or_404(Module, slug=slug)
    old_label, old = _version(module, request.GET.get("from", ""))
    new_label, new = _version(module, request.GET.get("to", CURRENT))
    rows = diff_rows(old, new)
    added, removed = diff_stats(rows)
    return render(request, "authoring/diff.html", {
        "module": module, "rows": rows, "old_label": old_label, "new_label": new_label,
        "added": added, "removed": removed,
    })


@require_POST
@instructor_required
def module_restore(request, slug: str, revision_id: int):
    """Bring back a revision's text and front matter, checked as a save from the editor would be.

    The first POST changes nothing: it shows what the restore would change (a diff against the current
    version) and asks. Only a POST whose `confirm` names that diff's version (`content_digest`) restores, so
    an edit made meanwhile is shown again rather than overwritten unseen; cancelling leaves everything as it was.
    The module keeps its slug, place in the track and published state: restoring changes what the lesson
    says, not where it is or who sees it. The restore is itself a new revision, so it can be undone.
    """
    module = get_object_or_404(Module.objects.select_related("track"), slug=slug)
    revision = module.history.filter(history_id=revision_id).first()
    if revision is None:
        raise Http404("No such revision of this module.")
    track = revision.track_id if Track.objects.filter(pk=revision.track_id).exists() else module.track_id
    form = ModuleForm({
        "title": revision.title, "short_title": revision.short_title, "slug": module.slug, "track": track,
        "order": module.order, "prerequisites": ", ".join(revision.prerequisites or []),
        "summary": revision.summary, "source": revision.source,
    }, instance=module)
    history_url = reverse("authoring:history", args=[slug])
    if not form.is_valid():
        problems = "; ".join(f"{form[name].label if name in form.fields else name}: {' '.join(errors)}"
                             for name, errors in form.errors.items())
        messages.error(request, f"Not restored: that revision no longer passes today's checks ({problems}).")
        return redirect(history_url)
    when = f"{revision.history_date:%Y-%m-%d %H:%M}"
    current = file_text(*stored_authored(module))
    proposed = file_text(form.front_matter(), form.cleaned_data["source"])
    if request.POST.get("confirm") != content_digest(current + "\0" + proposed):
        rows = diff_rows(current, proposed)
        added, removed = diff_stats(rows)
        return render(request, "authoring/restore_confirm.html", {
            "module": module, "revision": revision, "when": when, "rows": rows, "added": added,
            "removed": removed, "digest": content_digest(current + "\0" + proposed),
            "changed_since": "confirm" in request.POST,
        })
    with transaction.atomic():
        save_module(module, form.front_matter(), form.cleaned_data["source"], form.rendered,
                    form.cleaned_data["track"], reason=f"Restored the revision of {when}")
    messages.success(request, f"Restored the revision of {when}"
                     + (" (a draft: students do not see it)." if module.draft else ": students see it now."))
    return redirect(history_url)
