"""Module images over HTTP: an instructor uploads one (with its alt text), and the lesson's relative
``images/NAME`` is served beside the student page and beside the editor (for its live preview).

A draft module's images are served to instructors only, as its page is; the content type is the one
recognised from the bytes at upload (`images.KINDS`), with `nosniff`.
"""
from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from . import images
from .authoring import PERMISSION, _edit_context, instructor_required
from .forms import ModuleForm
from .models import Module, ModuleImage


@require_safe
def image_file(request, slug: str, name: str):
    image = ModuleImage.objects.select_related("module").filter(module__slug=slug, name=name).first()
    if image is None or image.module.deleted_at is not None:
        raise Http404("No such image.")
    if image.module.draft and not request.user.has_perm(PERMISSION):
        raise Http404("No such image.")
    path = images.file_path(image)
    if not path.is_file():
        raise Http404("The image file is missing.")
    response = FileResponse(open(path, "rb"), content_type=images.KINDS[image.extension].content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=300" if image.module.draft else "public, max-age=300"
    return response


@require_safe
@instructor_required
def author_image_file(request, slug: str, name: str):
    """The same image beside the editor, where the live preview's relative ``images/NAME`` points."""
    return image_file(request, slug, name)


@require_POST
@instructor_required
def image_upload(request, slug: str):
    """Store an uploaded image with its (required) alt text; the message gives the line to write."""
    module = get_object_or_404(Module, slug=slug)
    upload, alt = request.FILES.get("image"), request.POST.get("alt", "")
    try:
        if upload is None:
            raise ValueError("Choose an image file.")
        data = upload.read(images.MAX_IMAGE_BYTES + 1)
        kind = images.check(data, alt)
        image = images.store(module, images.lesson_name(upload.name, kind), data, alt)
    except ValueError as exc:
        context = {**_edit_context(ModuleForm(instance=module), module), "image_error": str(exc), "image_alt": alt}
        return render(request, "courseapp/authoring/edit.html", context, status=400)
    messages.success(request, f"Uploaded {image.name}. Show it in the lesson with: "
                              f"![{image.alt}]({images.LESSON_PREFIX}{image.name})")
    return redirect(reverse("courseapp:author_edit", args=[slug]) + "#images")
