"""docs/deploy.md's nginx block, read from the page and run in a real nginx in front of a real Daphne
(MEDIA_ACCEL_REDIRECT=/internal-media/, as the page's production settings say): a draft module's narration and
images are refused to anyone but an instructor however they are asked for, a published module's are sent by
nginx with their bytes, content type and byte ranges, and the internal location cannot be asked for directly."""
from __future__ import annotations

import http.client
import os
import signal

import pytest
from demo_stack import Stack
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission, User
from django.test import Client
from nginx_proxy import MISSING, NGINX, Nginx, deploy_block

from courseapp import images
from courseapp.models import Module, Track
from narration.models import Narration

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

AUDIO = {"pub": os.urandom(300_000), "draft": os.urandom(1000)}
PNG = {"pub": b"\x89PNG\r\n\x1a\n" + os.urandom(2000), "draft": b"\x89PNG\r\n\x1a\n" + os.urandom(500)}


@pytest.fixture(scope="module")
def site(django_db_setup, tmp_path_factory):
    """(nginx port, Daphne port, media root): Daphne on the test database behind the deploy page's nginx block."""
    if NGINX is None:
        pytest.skip(MISSING)
    work = tmp_path_factory.mktemp("deploy-nginx")
    media, static = work / "media", work / "static"
    (media / "narration").mkdir(parents=True)
    static.mkdir()
    database = str(django_settings.DATABASES["default"]["TEST"]["NAME"])  # a file Daphne opens too
    stack = Stack(work, database, {"MEDIA_ROOT": str(media), "MEDIA_ACCEL_REDIRECT": "/internal-media/"})
    proxy = None
    try:
        stack.start_daphne()
        proxy = Nginx(work / "nginx", stack.http_port,
                      server=lambda port: deploy_block(port, stack.http_port, media, static))
        yield proxy.port, stack.http_port, media
    finally:
        if proxy:
            proxy.stop()
        stack.kill("daphne", signal.SIGTERM)


@pytest.fixture
def modules(site, settings):
    """A published and a draft module, each with a narration and an image stored where Daphne looks."""
    *_, media = site
    settings.MEDIA_ROOT = media
    track = Track.objects.create(slug="t", title="T")
    digests = {}
    for slug in ("pub", "draft"):
        module = Module.objects.create(slug=slug, title=slug, track=track, draft=slug == "draft")
        (media / "narration" / f"{slug}.mp3").write_bytes(AUDIO[slug])
        (media / "narration" / f"{slug}.vtt").write_text("WEBVTT\n")
        Narration.objects.create(module=module, status="ready", audio=f"narration/{slug}.mp3",
                                 vtt=f"narration/{slug}.vtt")
        digests[slug] = images.store(module, "diagram.png", PNG[slug], "A diagram").digest
    return digests


def get(port: int, path: str, headers: dict | None = None) -> tuple[http.client.HTTPResponse, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response, response.read()
    finally:
        connection.close()


def test_published_media_comes_from_nginx_with_ranges_and_drafts_never(site, modules):
    port, daphne, _ = site
    # The application only names the file; nginx sends it.
    response, body = get(daphne, "/narration/pub.mp3")
    assert response.status == 200 and body == b""
    assert response.getheader("X-Accel-Redirect") == "/internal-media/narration/pub.mp3"
    response, body = get(daphne, "/modules/pub/images/diagram.png")
    assert response.getheader("X-Accel-Redirect") == f"/internal-media/module-images/{modules['pub']}.png"
    assert get(daphne, "/narration/draft.mp3")[0].status == 404

    response, body = get(port, "/narration/pub.mp3")
    assert response.status == 200 and body == AUDIO["pub"]
    assert response.getheader("Content-Type") == "audio/mpeg"
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert response.getheader("X-Accel-Redirect") is None  # nginx consumed it: the file name stays inside

    # A seekable player: nginx answers the range itself, from anywhere in the file.
    response, body = get(port, "/narration/pub.mp3", {"Range": "bytes=250000-250099"})
    assert response.status == 206 and body == AUDIO["pub"][250_000:250_100]
    assert response.getheader("Content-Range") == f"bytes 250000-250099/{len(AUDIO['pub'])}"
    response, body = get(port, "/narration/pub.mp3", {"Range": "bytes=-10"})
    assert response.status == 206 and body == AUDIO["pub"][-10:]

    response, body = get(port, "/modules/pub/images/diagram.png")
    assert response.status == 200 and body == PNG["pub"] and response.getheader("Content-Type") == "image/png"

    # A draft's files: not through the application, not from disk under any public or internal name.
    for path in ("/narration/draft.mp3", "/narration/draft.vtt", "/modules/draft/images/diagram.png",
                 "/media/narration/draft.mp3", "/media/narration/pub.mp3",
                 f"/media/module-images/{modules['draft']}.png",
                 "/internal-media/narration/draft.mp3", "/internal-media/narration/pub.mp3",
                 f"/internal-media/module-images/{modules['draft']}.png",
                 f"/internal-media/module-images/{modules['pub']}.png",
                 "/narration/../internal-media/narration/draft.mp3"):
        response, body = get(port, path)
        assert response.status == 404, (path, response.status)
        assert AUDIO["draft"] not in body and PNG["draft"] not in body


def test_an_instructor_gets_a_drafts_media_through_nginx(site, modules):
    port, *_ = site
    teacher = User.objects.create_user("teacher", password="teacher-pass-123")
    # The permission the instructor group carries (the group itself is migration data, gone after a flush).
    teacher.user_permissions.add(Permission.objects.get(content_type__app_label="courseapp", codename="instructor"))
    client = Client()
    client.force_login(teacher)  # a session row in the database Daphne reads
    cookie = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    response, body = get(port, "/narration/draft.mp3", cookie)
    assert response.status == 200 and body == AUDIO["draft"]
    response, body = get(port, "/modules/draft/images/diagram.png", cookie)
    assert response.status == 200 and body == PNG["draft"]
    assert response.getheader("Cache-Control") == "private, max-age=300"
