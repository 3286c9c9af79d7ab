"""A lesson's images, served beside its page (``images/NAME``): who may see them is decided here, by their module."""
from __future__ import annotations

from django.http import FileResponse, Http404
from django.views.decorators.http import require_safe

from inferencelab.media_accel import accel_response

from . import images
from .instructors import PERMISSION
from .models import ModuleImage


@require_safe
def image_file(request, slug: str, name: str):
    """A lesson's image (``images/NAME`` beside its page); a draft module's images to instructors only, as its page
    is; the content type is the one recognised from the bytes at upload (`images.KINDS`), with `nosniff`. Behind
    nginx (MEDIA_ACCEL_REDIRECT) nginx sends the file once this view has allowed it."""
    image = ModuleImage.objects.select_related("module").filter(module__slug=slug, name=name).first()
    if image is None or image.module.deleted_at is not None:
        raise Http404("No such image.")
    if image.module.draft and not request.user.has_perm(PERMISSION):
        raise Http404("No such image.")
    path = images.file_path(image)
    if not path.is_file():
        raise Http404("The image file is missing.")
    content_type = images.KINDS[image.extension].content_type
    response = accel_response(path, content_type) or FileResponse(open(path, "rb"), content_type=content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=300" if image.module.draft else "public, max-age=300"
    return response
