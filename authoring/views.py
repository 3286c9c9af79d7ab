"""Instructor views: list, create, edit (with live preview), publish, reorder, narration, export, zip import.

Every view requires the `courseapp.instructor` permission (the "instructor" group has it): anonymous
visitors are redirected to the login page, signed-in students get 403.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.db.models import F
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from courseapp import images
from courseapp.forms import ModuleForm
from courseapp.instructors import instructor_required
from courseapp.loader import normalize_newlines, save_module, shown_path, stored_authored
from courseapp.models import QUIZ_MARKER, Module, Track
from courseapp.quiz import pass_mark
from courseapp.rendering import ContentError, render_markdown
from labs.reference import lab_reference
from narration import captions
from narration.forms import NarrationUploadForm
from narration.jobs import attach_upload, enqueue_narration
from narration.models import Narration
from serverprofile import figures as server_figures

from . import content_sync, dependents, format_reference
from .diffs import content_digest, diff_rows, diff_stats, file_text
from .models import ModuleDraft
from .narration_state import narration_state


@require_GET
@instructor_required
def module_list(request):
    return render(request, "authoring/list.html", _list_context())


def _list_context() -> dict:
    """The authoring list page: every track with its modules in course order, and their narration."""
    tracks = []
    modules = Module.objects.in_course_order().select_related("narration", "pending_draft")
    by_track: dict[int, list] = {}
    for module in modules:
        by_track.setdefault(module.track_id, []).append({"module": module, "narration": narration_state(module)})
    for track in Track.objects.order_by("order", "slug"):
        rows = by_track.get(track.pk, [])
        for index, row in enumerate(rows):
            row["first"], row["last"] = index == 0, index == len(rows) - 1
        tracks.append({"track": track, "rows": rows})
    deleted = Module.all_objects.filter(deleted_at__isnull=False).select_related("track").order_by("-deleted_at")
    return {"tracks": tracks, "content_dir": settings.CONTENT_DIR, "conflicts": content_sync.conflicts(),
            "deleted": deleted}


def _preview_html(rendered) -> str:
    """The student HTML, with the quiz shown read-only with its answers and explanations."""
    quiz = render_to_string("authoring/_quiz_preview.html", {
        "questions": rendered.questions, "pass_mark": pass_mark(len(rendered.questions)),
    }) if rendered.questions else ""
    return server_figures.fill(rendered.html).replace(QUIZ_MARKER, quiz)


def _error_summary(form) -> list[dict]:
    """Field errors with links to the fields, shown above the form."""
    summary = [{"label": "", "anchor": "", "messages": form.non_field_errors()}] if form.non_field_errors() else []
    for name, errors in form.errors.items():
        if name in form.fields:
            summary.append({"label": form[name].label, "anchor": form[name].id_for_label, "messages": errors})
    return summary


def _edit_context(form, module: Module | None, preview: str = "") -> dict:
    if not preview and form.is_bound and "source" in form.errors:
        preview = render_to_string("authoring/_preview_error.html",
                                   {"message": " ".join(form.errors["source"])})
    return {
        "form": form,
        "error_summary": _error_summary(form) if form.is_bound else [],
        "module": module,
        "preview": preview,
        "narration": narration_state(module) if module else None,
        "upload_form": NarrationUploadForm(live_narration=getattr(module, "narration", None)) if module else None,
        "images": list(module.images.all()) if module else [],
        "captions": captions.cues_of(module.narration) if module and getattr(module, "narration", None) else [],
    }


def _new_module_initial() -> dict:
    """A new module goes at the end of the first track, as a draft with a heading to start from."""
    track = Track.objects.order_by("order", "slug").first()
    last = Module.objects.filter(track=track).order_by("-order").values_list("order", flat=True).first()
    return {"track": track, "order": (last or 0) + 1, "source": "## First section\n\nWrite the lesson here.\n"}


def _live_change(module: Module | None, front_matter: dict, source: str) -> dict | None:
    """What publishing `front_matter` + `source` would change for students, when the module is published and
    its text changes.

    The author confirms after seeing this diff; the confirmation names the proposed version by digest, so
    an edit made after looking at the diff is shown again rather than published unseen.
    """
    stored = stored_authored(module) if module is not None else None
    if stored is None or stored[0]["draft"]:
        return None
    old, new = file_text(*stored), file_text(front_matter, source)
    rows = diff_rows(old, new)
    if not rows:
        return None
    added, removed = diff_stats(rows)
    return {"rows": rows, "added": added, "removed": removed, "digest": content_digest(new)}


def _image_warnings(request, module: Module, html: str) -> None:
    """Saved, but an image is external, missing or without alt text: say so (`images.warnings`)."""
    names = set(module.images.values_list("name", flat=True)) if module.pk else set()
    for warning in images.warnings(html, names):
        messages.warning(request, warning)


def _pending(module: Module | None) -> ModuleDraft | None:
    return ModuleDraft.objects.filter(module=module).first() if module is not None else None


def _draft_form(module: Module, pending: ModuleDraft) -> ModuleForm:
    """The editor filled with the unpublished changes (the module's own values where the draft lacks one)."""
    fields = pending.front_matter
    track = Track.objects.filter(slug=fields.get("track")).first() or module.track
    return ModuleForm(instance=module, initial={
        "title": fields.get("title", module.title), "short_title": fields.get("short_title", module.short_title),
        "track": track, "order": fields.get("order", module.order),
        "prerequisites": ", ".join(fields.get("prerequisites", module.prerequisites)),
        "summary": fields.get("summary", module.summary), "source": pending.source,
    })


def _edit_page(request, form, module: Module | None, preview: str, pending: ModuleDraft | None,
               live_change: dict | None = None):
    context = {**_edit_context(form, module, preview), "live_change": live_change, "pending": pending}
    return render(request, "authoring/edit.html", context)


@require_http_methods(["GET", "POST"])
@instructor_required
def module_edit(request, slug: str | None = None):
    """Edit a module. A draft module is saved at once; a saved change to a published module is kept as its
    unpublished changes (`ModuleDraft`, server-side) and shown as a diff until the author publishes or
    discards it: students see the published text meanwhile, and the draft survives leaving the page."""
    module = get_object_or_404(Module.objects.select_related("track", "narration"), slug=slug) if slug else None
    pending = _pending(module)
    form = ModuleForm(request.POST or None, instance=module, initial=None if module else _new_module_initial())
    if request.method == "POST":
        if form.is_valid():
            if request.POST.get("action") == "preview":
                return _edit_page(request, form, module, _preview_html(form.rendered), pending)
            front_matter, source = form.front_matter(), form.cleaned_data["source"]
            live_change = _live_change(module, front_matter, source)
            if live_change and request.POST.get("confirm_live") != live_change["digest"]:
                pending, _ = ModuleDraft.objects.update_or_create(module=module, defaults={
                    "front_matter": front_matter, "source": source, "author": request.user})
                _image_warnings(request, module, form.rendered.html)
                return _edit_page(request, form, module, _preview_html(form.rendered), pending, live_change)
            row = module or Module()
            with transaction.atomic():
                save_module(row, front_matter, source, form.rendered, form.cleaned_data["track"],
                            reason="Edited in the authoring page")
                ModuleDraft.objects.filter(module=row).delete()  # published, or the edit took its place
            messages.success(request, f"Saved “{row.title}”" + (" (draft)." if row.draft else "."))
            _image_warnings(request, row, form.rendered.html)
            return redirect("authoring:edit", slug=row.slug)
        messages.error(request, "Not saved: please fix the errors below.")
        return _edit_page(request, form, module, "", pending)
    if pending is not None:
        form = _draft_form(module, pending)
        try:
            rendered = render_markdown(pending.source)
        except ContentError as exc:  # the renderer grew stricter since: the editor shows why on the next save
            preview = render_to_string("authoring/_preview_error.html", {"message": exc.message})
        else:
            preview = _preview_html(rendered)
        live_change = _live_change(module, pending.front_matter, pending.source)
        return _edit_page(request, form, module, preview, pending, live_change)
    preview = _preview_html(render_markdown(module.source)) if module else ""
    return _edit_page(request, form, module, preview, None)


@require_POST
@instructor_required
def discard_draft(request, slug: str):
    """Drop a published module's unpublished changes (students never saw them)."""
    module = get_object_or_404(Module, slug=slug)
    deleted, _ = ModuleDraft.objects.filter(module=module).delete()
    if deleted:
        messages.success(request, f"Discarded the unpublished changes to “{module.title}”.")
    return redirect("authoring:edit", slug=slug)


@require_GET
@instructor_required
def reference(request):
    """The format reference: directives, and every demo and calculator with its props (generated)."""
    return render(request, "authoring/reference.html", {
        "demos": format_reference.demos(), "calculators": format_reference.calculators(),
        "reference_runs": format_reference.reference_runs(), "labs": lab_reference(),
        "exercises": format_reference.exercises()})


@require_POST
@instructor_required
def preview(request):
    """Live preview for authoring.js: the same renderer as the student page, as an HTML fragment."""
    try:
        rendered = render_markdown(normalize_newlines(request.POST.get("source", "")))
    except ContentError as exc:
        where = f"Line {exc.line}: " if exc.line else ""
        return HttpResponse(render_to_string("authoring/_preview_error.html",
                                             {"message": f"{where}{exc.message}"}), status=422)
    return HttpResponse(_preview_html(rendered))


@require_POST
@instructor_required
def module_publish(request, slug: str):
    """Publish (`draft=0`) or unpublish (`draft=1`) a module. Unpublishing a published module first shows
    what it breaks for students (`dependents.breakages`) and asks; only `confirm=unpublish` does it."""
    module = get_object_or_404(Module, slug=slug)
    unpublish = request.POST.get("draft") == "1"
    if unpublish and not module.draft and request.POST.get("confirm") != "unpublish":
        return render(request, "authoring/unpublish_confirm.html", {
            "module": module, "breakages": dependents.breakages(module),
            "return_to": request.POST.get("return", ""),
        })
    module.draft = unpublish
    module.save(update_fields=["draft", "updated_at"])
    messages.success(request, f"“{module.title}” is now {'a draft' if module.draft else 'published'}.")
    if request.POST.get("return") == "list":
        return redirect("authoring:list")
    return redirect("authoring:edit", slug=module.slug)


@require_POST
@instructor_required
def module_delete(request, slug: str):
    """Delete a module from the course, softly: it leaves every page at once, and "Undo" on the authoring
    list brings it back as it was (its revisions, narration and learners' records are kept). The first POST
    shows what the delete breaks (`dependents.breakages`) and asks; only `confirm=delete` deletes."""
    module = get_object_or_404(Module, slug=slug)
    if request.POST.get("confirm") != "delete":
        return render(request, "authoring/delete_confirm.html", {
            "module": module, "breakages": dependents.breakages(module) if not module.draft else [],
        })
    module.deleted_at = timezone.now()
    module.save(update_fields=["deleted_at", "updated_at"])
    messages.success(request, f"Deleted “{module.title}”: students no longer see it. "
                              "Undo it under “Deleted modules” below.")
    return redirect(reverse("authoring:list") + "#deleted")


@require_POST
@instructor_required
def module_undelete(request, slug: str):
    """Undo a delete: the module is back where it was, as it was (published or draft)."""
    module = get_object_or_404(Module.all_objects.filter(deleted_at__isnull=False), slug=slug)
    module.deleted_at = None
    module.save(update_fields=["deleted_at", "updated_at"])
    messages.success(request, f"“{module.title}” is back"
                     + (" (a draft)." if module.draft else ": students see it again."))
    return redirect(reverse("authoring:list") + f"#track-{module.track.slug}")


@require_POST
@instructor_required
@transaction.atomic
def module_move(request, slug: str):
    """Move a module up or down within its track by swapping `order` with its neighbour.

    Only the two modules that change places are written (an export then touches two files); a track
    whose neighbours share an `order` is renumbered 1..n once, since a swap could not separate them.
    """
    module = get_object_or_404(Module, slug=slug)
    siblings = list(Module.objects.select_for_update().filter(track=module.track).order_by("order", "slug"))
    index = next(i for i, sibling in enumerate(siblings) if sibling.pk == module.pk)
    target = index - 1 if request.POST.get("direction") == "up" else index + 1
    if 0 <= target < len(siblings):
        here, there = siblings[index], siblings[target]
        if here.order != there.order:
            orders = {here.pk: there.order, there.pk: here.order}
        else:
            siblings[index], siblings[target] = there, here
            orders = {s.pk: n for n, s in enumerate(siblings, start=1)}
        for sibling in siblings:
            if sibling.pk in orders and orders[sibling.pk] != sibling.order:
                Module.objects.filter(pk=sibling.pk).update(order=orders[sibling.pk], updated_at=F("updated_at"))
    return redirect(reverse("authoring:list") + f"#track-{module.track.slug}")


@require_POST
@instructor_required
def narration_generate(request, slug: str):
    module = get_object_or_404(Module, slug=slug)
    if not module.cues:
        messages.error(request, "This module has no headings or paragraphs to narrate.")
        return redirect("authoring:edit", slug=slug)
    live = getattr(module, "narration", None)
    if live is not None and live.is_ready and live.origin == Narration.Origin.UPLOAD \
            and request.POST.get("replace_upload") != "1":
        message = ("Students hear an uploaded recording of this module now. Generating narration replaces it: "
                   "tick “Replace the uploaded recording” to confirm.")
        if request.headers.get("X-Requested-With") == "fetch":
            return JsonResponse({**narration_state(module), "error": message}, status=409)
        messages.error(request, message)
        return redirect(reverse("authoring:edit", args=[slug]) + "#narration")
    record = enqueue_narration(module, force=request.POST.get("force") == "1")
    if record.status == Narration.Status.FAILED:
        messages.error(request, record.error)
    else:
        messages.info(request, "Narration queued: the progress bar below follows the synthesis.")
    if request.headers.get("X-Requested-With") == "fetch":
        return JsonResponse(narration_state(module))
    return redirect(reverse("authoring:edit", args=[slug]) + "#narration")


@require_GET
@instructor_required
def narration_status(request, slug: str):
    module = get_object_or_404(Module.objects.select_related("narration"), slug=slug)
    return JsonResponse(narration_state(module))


@require_POST
@instructor_required
def narration_upload(request, slug: str):
    module = get_object_or_404(Module.objects.select_related("track", "narration"), slug=slug)
    upload = NarrationUploadForm(request.POST, request.FILES, live_narration=getattr(module, "narration", None))
    if upload.is_valid():
        attach_upload(module, upload.cleaned_data["audio"], upload.audio_kind.extension,
                      upload.cleaned_data["vtt"], upload.duration())
        lesson_ids = {cue["id"] for cue in module.cues}
        matched = sum(1 for cue in upload.cues if cue.id in lesson_ids)
        messages.success(request, f"Uploaded narration is now used for this module: {matched} of "
                                  f"{len(upload.cues)} cues match a paragraph of the lesson (ids c1…c{len(lesson_ids)}).")
        return redirect(reverse("authoring:edit", args=[slug]) + "#narration")
    messages.error(request, "Upload rejected: please fix the errors below.")
    context = _edit_context(ModuleForm(instance=module), module)
    context["upload_form"] = upload
    return render(request, "authoring/edit.html", context, status=400)


@require_POST
@instructor_required
def narration_caption(request, slug: str):
    """Change one caption's text in place (`captions.edit_caption`): no new audio, no upload."""
    module = get_object_or_404(Module.objects.select_related("track", "narration"), slug=slug)
    record = getattr(module, "narration", None)
    cue_id = request.POST.get("cue", "")
    try:
        if record is None or not record.is_ready:
            raise ValueError("This module has no narration to caption yet.")
        cue = captions.edit_caption(record, cue_id, request.POST.get("text", ""))
    except ValueError as exc:
        messages.error(request, f"Caption not changed: {exc}")
        context = _edit_context(ModuleForm(instance=module), module)
        return render(request, "authoring/edit.html", context, status=400)
    messages.success(request, f"Caption {cue.id} changed: students see the new text with the same audio.")
    return redirect(reverse("authoring:edit", args=[slug]) + f"#caption-{cue.id}")


@require_POST
@instructor_required
def resolve_conflict(request, slug: str):
    """A content file changed on disk while its module was edited here: `action=keep_web` writes the module
    to the file, `action=take_file` loads the file into the module (the web version stays in History)."""
    module = get_object_or_404(Module.objects.select_related("track"), slug=slug)
    shown = shown_path(content_sync.content_path(module))
    action = request.POST.get("action")
    if action == "keep_web":
        content_sync.keep_web(module)
        messages.success(request, f"Kept the web version of “{module.title}”: written to {shown}.")
    elif action == "take_file":
        try:
            content_sync.take_file(module)
        except ContentError as exc:
            messages.error(request, f"Not changed: {exc}. Fix the file, or keep the web version.")
            return redirect("authoring:list")
        messages.success(request, f"“{module.title}” now has {shown}'s version; the web version is in its History.")
    else:
        messages.error(request, "Choose to keep the web version or to take the file's.")
    return redirect("authoring:list")
