"""Images: uploaded with their alt text, stored with the module, served beside its page and the editor,
carried by the course zip; a save warns about external, missing and alt-less images."""
from __future__ import annotations

import html
import io
import struct
import zipfile
import zlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from authoring.archive import build_zip, import_zip
from courseapp.loader import CourseLoadError
from courseapp.models import Module, ModuleImage

from authoring_helpers import editor_data, save_live

pytestmark = pytest.mark.django_db


def png(width: int = 2, height: int = 1) -> bytes:
    """A real, tiny PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def upload(client, slug: str, data: bytes, alt: str, name: str = "KV Cache Layout.PNG"):
    return client.post(reverse("authoring:image_upload", args=[slug]),
                       {"image": SimpleUploadedFile(name, data, "image/png"), "alt": alt})


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_an_uploaded_image_is_shown_on_the_student_page_and_in_the_preview(author, client, student):
    response = upload(author, "intro", png(), "Keys and values stacked per layer")
    assert response.status_code == 302
    image = ModuleImage.objects.get(module__slug="intro")
    assert image.name == "kv-cache-layout.png" and image.alt == "Keys and values stacked per layer"
    page = text(author.get(reverse("authoring:edit", args=["intro"])))
    assert "![Keys and values stacked per layer](images/kv-cache-layout.png)" in page

    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source + "\n![Keys and values](images/kv-cache-layout.png)\n"))
    # The lesson's relative address resolves beside the editor (preview) and beside the student page.
    editor_copy = author.get(reverse("authoring:edit", args=["intro"]) + "images/kv-cache-layout.png")
    assert editor_copy.status_code == 200 and editor_copy["Content-Type"] == "image/png"
    client.force_login(student)
    lesson = client.get("/modules/intro/")
    assert '<img src="images/kv-cache-layout.png" alt="Keys and values">' in lesson.content.decode()
    served = client.get("/modules/intro/images/kv-cache-layout.png")
    assert served.status_code == 200 and served["X-Content-Type-Options"] == "nosniff"
    assert b"".join(served.streaming_content) == png()


@pytest.mark.parametrize("data, alt, message", [
    (png(), "   ", "Describe the image in its alt text"),
    (b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>", "A logo",
     "Not a PNG, JPEG, GIF or WebP image"),
])
def test_an_image_without_alt_text_or_not_an_image_is_refused(author, data, alt, message):
    response = upload(author, "intro", data, alt)
    assert response.status_code == 400 and message in text(response)
    assert not ModuleImage.objects.exists()


def test_a_draft_modules_images_are_for_instructors_only(author, client, student):
    upload(author, "batching", png(), "A batch")
    assert author.get("/modules/batching/images/kv-cache-layout.png").status_code == 200
    client.force_login(student)
    assert client.get("/modules/batching/images/kv-cache-layout.png").status_code == 404


def test_saving_warns_about_external_missing_and_alt_less_images(author):
    upload(author, "intro", png(), "Layout")
    module = Module.objects.get(slug="intro")
    source = (module.source + "\n![A chart](https://example.org/chart.png)\n\n![A plot](images/plot.png)\n\n"
              "![](images/kv-cache-layout.png)\n")
    response = save_live(author, "intro", editor_data(module, source))
    page = text(author.get(response["Location"]))
    assert "The image https://example.org/chart.png is on another site" in page
    assert "The image images/plot.png is missing: upload it to this module" in page
    assert "The image images/kv-cache-layout.png has no alt text" in page
    assert Module.objects.get(slug="intro").source.endswith("![](images/kv-cache-layout.png)\n")  # saved anyway


def test_images_travel_in_the_zip_with_their_alt_text(author):
    upload(author, "intro", png(), "Keys and values: stacked")
    files = zipfile.ZipFile(io.BytesIO(build_zip()))
    assert files.read("images/intro/kv-cache-layout.png") == png()
    assert files.read("images/intro/alt.yaml") == b"kv-cache-layout.png: 'Keys and values: stacked'\n"
    exported = build_zip()

    ModuleImage.objects.all().delete()
    report = import_zip(io.BytesIO(exported))
    assert "1 image(s) stored with their modules." in report.notes
    image = ModuleImage.objects.get(module__slug="intro", name="kv-cache-layout.png")
    assert image.alt == "Keys and values: stacked"
    assert author.get("/modules/intro/images/kv-cache-layout.png").status_code == 200


def test_a_zip_image_without_alt_text_is_refused_and_changes_nothing(author):
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(build_zip())) as source, zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "intro.md":
                data = data.replace(b"Training happens once.", b"Changed by the zip.")
            target.writestr(info.filename, data)
        target.writestr("images/intro/plot.png", png())
        target.writestr("images/intro/alt.yaml", "other.png: Something else\n")
    with pytest.raises(CourseLoadError) as caught:
        import_zip(io.BytesIO(buffer.getvalue()))
    assert any("plot.png has no alt text" in str(error) for error in caught.value.errors)
    assert "Changed by the zip." not in Module.objects.get(slug="intro").source
    assert not ModuleImage.objects.exists()
