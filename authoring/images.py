"""Module images in the editor: an instructor uploads one (with its alt text), and the lesson's relative
``images/NAME`` is served beside the editor (for its live preview) as it is beside the student page
(`courseapp.image_views.image_file`, which also says who may see a draft's images).
"""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from courseapp import images
from courseapp.forms import ModuleForm
from courseapp.instructors import instructor_required
from courseapp.models import Module
from courseapp.image_views import image_file

from .views import _edit_context


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
        return render(request, "authoring/edit.html", context, status=400)
    messages.success(request, f"Uploaded {image.name}. Show it in the lesson with: "
                              f"![{image.alt}]({images.LESSON_PREFIX}{image.name})")
    return redirect(reverse("authoring:edit", args=[slug]) + "#images")
