"""With MEDIA_ACCEL_REDIRECT (behind nginx, docs/deploy.md) the media views still decide who gets a file, and only
name it to nginx; tests/demos/test_deploy_nginx.py runs the same through a real nginx."""
from __future__ import annotations

import pytest

from courseapp import images
from courseapp.models import Module
from inferencelab.media_accel import accel_response
from narration.models import Narration

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
def accel(settings):
    settings.MEDIA_ACCEL_REDIRECT = "/internal-media/"


def narrated(media_root, slug: str) -> str:
    (media_root / "narration").mkdir(parents=True, exist_ok=True)
    (media_root / "narration" / f"{slug} 1.mp3").write_bytes(b"ID3" + b"\x00" * 100)
    Narration.objects.update_or_create(module=Module.objects.get(slug=slug),
                                       defaults={"status": "ready", "audio": f"narration/{slug} 1.mp3"})
    return f"/narration/{slug}%201.mp3"


@pytest.mark.django_db
def test_the_views_name_a_cleared_file_to_nginx_and_refuse_a_draft_as_before(client, course, instructor, accel,
                                                                             media_root):
    url = narrated(media_root, "intro")
    image = images.store(Module.objects.get(slug="intro"), "d.png", PNG, "A diagram")
    response = client.get(url, HTTP_RANGE="bytes=0-9")  # the range is nginx's to answer, from the whole file
    assert response.status_code == 200 and response.content == b""
    assert response["X-Accel-Redirect"] == "/internal-media/narration/intro%201.mp3"
    assert response["Content-Type"] == "audio/mpeg"
    response = client.get("/modules/intro/images/d.png")
    assert response["X-Accel-Redirect"] == f"/internal-media/module-images/{image.digest}.png"
    assert response["Content-Type"] == "image/png" and response.content == b""

    Module.objects.filter(slug="intro").update(draft=True)
    assert client.get(url).status_code == 404
    assert client.get("/modules/intro/images/d.png").status_code == 404
    client.force_login(instructor)
    assert client.get(url)["X-Accel-Redirect"] == "/internal-media/narration/intro%201.mp3"


def test_a_file_outside_media_root_is_never_named(accel, media_root, tmp_path):
    outside = tmp_path / "elsewhere.mp3"
    outside.write_bytes(b"x")
    assert accel_response(outside, "audio/mpeg") is None
    assert accel_response(media_root / ".." / "elsewhere.mp3", "audio/mpeg") is None

