"""Findings of the outside probe, each a regression test: narration uploads and media, login guessing,
secure defaults. HTTP through Django's test client (the socket-level limits: tests/test_hardening_http.py)."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import wave
from datetime import timedelta
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import F
from django.test import Client
from django.urls import reverse

from narration import media
from courseapp.models import Module
from narration.models import Narration
from narration.files import sniff_audio
from inferencelab.secret_key import ensure_key_file, secret_key

ROOT = Path(__file__).resolve().parents[2]
VTT = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\nWhy it matters\n"
XSS_VTT = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\n<script>alert(document.cookie)</script>\n"


def wav_bytes(seconds: float = 1.0) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(b"\x01\x00" * int(8000 * seconds))
    return buffer.getvalue()


def upload(client, slug="intro", audio=("a.wav", None), vtt=("a.vtt", VTT), **extra):
    name, data = audio
    return client.post(reverse("authoring:upload", args=[slug]), {
        "audio": SimpleUploadedFile(name, wav_bytes() if data is None else data),
        "vtt": SimpleUploadedFile(vtt[0], vtt[1]), **extra,
    })


@pytest.mark.django_db
def test_html_disguised_as_audio_is_rejected(client, course, instructor):
    client.force_login(instructor)
    response = upload(client, audio=("talk.mp3", b"<!doctype html><script>alert(1)</script>" + b" " * 64))
    assert response.status_code == 400
    assert "not an audio file this site can play" in response.content.decode()
    assert not Narration.objects.filter(module__slug="intro").exists()


@pytest.mark.django_db
def test_uploads_get_server_chosen_names_and_fixed_types(client, course, instructor):
    client.force_login(instructor)
    response = upload(client, audio=("x.html", wav_bytes()), vtt=("x.html", XSS_VTT))
    assert response.status_code == 302
    record = Narration.objects.get(module__slug="intro")
    audio_name, vtt_name = Path(record.audio.name).name, Path(record.vtt.name).name
    assert audio_name.endswith(".mp3") and vtt_name.endswith(".vtt") and "x" != audio_name[:1]  # WAV → MP3
    assert "x.html" not in record.audio.name + record.vtt.name
    client.logout()
    cues = client.get(record.vtt_url)
    assert cues.status_code == 200 and cues["Content-Type"] == "text/vtt; charset=utf-8"
    assert cues["X-Content-Type-Options"] == "nosniff" and "script-src 'self'" in cues["Content-Security-Policy"]
    audio = client.get(record.audio_url)
    assert audio.status_code == 200 and audio["Content-Type"] == "audio/mpeg"


@pytest.mark.django_db
def test_only_narration_files_are_served(client, course, media_root):
    planted = media_root / "narration" / "uploads" / "intro"
    planted.mkdir(parents=True)
    (planted / "x.html").write_text("<script>alert(1)</script>")
    (planted / "orphan.wav").write_bytes(wav_bytes())
    assert client.get("/narration/uploads/intro/x.html").status_code == 404  # a type we never serve
    assert client.get("/narration/uploads/intro/orphan.wav").status_code == 404  # no narration points at it


@pytest.mark.django_db
def test_draft_narration_is_private(client, course, instructor, student):
    client.force_login(instructor)
    assert upload(client).status_code == 302
    Module.objects.filter(slug="intro").update(draft=True)
    url = Narration.objects.get(module__slug="intro").audio_url
    client.logout()
    assert client.get(url).status_code == 404
    client.force_login(student)
    assert client.get(url).status_code == 404
    client.force_login(instructor)
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_range_answers_are_clamped_and_streamed(client, course, instructor, monkeypatch):
    monkeypatch.setattr(media, "MAX_CHUNK", 1000)
    client.force_login(instructor)
    assert upload(client, audio=("a.wav", wav_bytes(0.5))).status_code == 302
    record = Narration.objects.get(module__slug="intro")
    url, size = record.audio_url, record.audio.size

    def fetch(header):
        response = client.get(url, HTTP_RANGE=header)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        return response, body

    response, body = fetch("bytes=0-99999999999999")
    assert response.status_code == 206 and len(body) == 1000
    assert response["Content-Range"] == f"bytes 0-999/{size}" and response["Content-Length"] == "1000"
    response, body = fetch("bytes=-99999999")  # a suffix longer than the file: from 0, still one chunk
    assert response.status_code == 206 and len(body) == 1000 and response["Content-Range"].startswith("bytes 0-999/")
    response, body = fetch(f"bytes={size - 10}-")
    assert response.status_code == 206 and len(body) == 10
    response, body = fetch("bytes=0-1,5-9")  # several ranges: the whole file, streamed
    assert response.status_code == 200 and len(body) == size
    response, _ = fetch(f"bytes={size}-")
    assert response.status_code == 416 and response["Content-Range"] == f"bytes */{size}"


@pytest.mark.django_db
def test_replacing_a_live_narration_asks_first(client, course, instructor, monkeypatch):
    queued = []
    monkeypatch.setattr("narration.jobs.app.send_task",
                        lambda name, **kw: queued.append(kw) or type("R", (), {"id": "task-1"})())
    client.force_login(instructor)
    assert upload(client).status_code == 302
    first = Narration.objects.get(module__slug="intro").audio.name
    again = upload(client)
    assert again.status_code == 400 and "already has a live narration" in again.content.decode()
    assert Narration.objects.get(module__slug="intro").audio.name == first
    assert upload(client, replace="on").status_code == 302
    assert Narration.objects.get(module__slug="intro").audio.name != first

    page = client.get(reverse("authoring:edit", args=["intro"])).content.decode()
    assert "Live for students: <strong>Uploaded by an instructor</strong>" in page
    refused = client.post(reverse("authoring:narrate", args=["intro"]), follow=True)
    assert "Generating narration replaces it" in refused.content.decode() and not queued
    assert Narration.objects.get(module__slug="intro").origin == Narration.Origin.UPLOAD
    assert client.post(reverse("authoring:narrate", args=["intro"]), {"replace_upload": "1"}).status_code == 302
    assert len(queued) == 1


def test_audio_is_recognised_by_its_bytes():
    assert sniff_audio(wav_bytes()[:16]).extension == ".wav"
    assert sniff_audio(b"OggS\x00\x02" + b"\x00" * 10).extension == ".ogg"
    assert sniff_audio(b"ID3\x04\x00" + b"\x00" * 11).extension == ".mp3"
    assert sniff_audio(b"\xff\xfb\x90\x64" + b"\x00" * 12).extension == ".mp3"
    assert sniff_audio(b"\x00\x00\x00\x20ftypM4A \x00\x00").extension == ".m4a"
    for impostor in (b"<html><body>hi</b", b"WEBVTT\n\n00:00.000 -", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b""):
        assert sniff_audio(impostor) is None


SCHOOL, HOME, ATTACKER = "198.51.100.20", "203.0.113.7", "192.0.2.66"


def sign_in(client, username, password, address, **headers):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address,
                       **headers)


@pytest.mark.django_db
def test_login_guessing_locks_only_the_account_and_address_pair(client, student, settings):
    settings.LOGIN_MAX_FAILURES = 3
    assert [sign_in(client, "student", "wrong", ATTACKER).status_code for _ in range(3)] == [200, 200, 429]
    blocked = sign_in(client, "student", "student-pass-123", ATTACKER)
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
    assert "Too many failed sign-ins for this account from your network address" in blocked.content.decode()
    assert "_auth_user_id" not in client.session  # the right password does not get through meanwhile
    # The account's owner, from anywhere else, signs in at once: nobody can lock a user out.
    assert sign_in(Client(), "student", "student-pass-123", HOME).status_code == 302
    # Other accounts behind the guesser's address (a school's NAT) are not locked either.
    other = User.objects.create_user("classmate", password="classmate-pass-1")
    assert sign_in(Client(), other.username, "classmate-pass-1", ATTACKER).status_code == 302


@pytest.mark.django_db
def test_many_failures_from_a_shared_address_lock_out_no_one_else(client, student, settings):
    """Five wrong passwords each for many accounts from one address (a classroom, or `make run` on loopback)."""
    settings.LOGIN_MAX_FAILURES = 5
    for name in ("a", "b", "c", "d"):
        for _ in range(5):
            sign_in(client, name, "wrong", SCHOOL)
    assert sign_in(Client(), "student", "student-pass-123", SCHOOL).status_code == 302


@pytest.mark.django_db
def test_a_forged_forwarded_address_or_user_agent_does_not_reset_the_count(client, student, settings):
    settings.LOGIN_MAX_FAILURES = 3
    for trusted in (0, 1):  # without a proxy the header is ignored; behind one, only its own entry counts
        settings.TRUSTED_PROXIES = trusted
        peer, last = ("192.0.2.70", None) if trusted == 0 else ("127.0.0.1", "192.0.2.71")
        codes = []
        for i in range(4):
            forged = f"10.0.0.{i}, 127.0.0.1, unknown" + (f", {last}" if last else "")
            codes.append(sign_in(client, "student", "wrong", peer, HTTP_X_FORWARDED_FOR=forged,
                                 HTTP_USER_AGENT=f"guesser/{i}").status_code)  # nor does a new user agent
        assert codes == [200, 200, 429, 429], (trusted, codes)


def wait_out(seconds: float) -> None:
    """The stored sign-in attempts as if `seconds` had passed since each."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(seconds=seconds))


@pytest.mark.django_db
def test_login_delays_grow_with_each_lockout_up_to_the_cap(client, student, settings):
    settings.LOGIN_MAX_FAILURES = 3
    settings.LOGIN_LOCKOUT_SECONDS = 60
    settings.LOGIN_LOCKOUT_MAX_SECONDS = 200
    tries = [sign_in(client, "student", "wrong", ATTACKER) for _ in range(3)]
    assert [r.status_code for r in tries] == [200, 200, 429]
    assert int(tries[-1]["Retry-After"]) == 60  # first lock: LOGIN_LOCKOUT_SECONDS
    assert "Try again in 60 seconds" in tries[-1].content.decode()
    # While locked even the right password is refused unchecked, and it counts nothing.
    for _ in range(3):
        blocked = sign_in(client, "student", "student-pass-123", ATTACKER)
        assert blocked.status_code == 429 and 0 < int(blocked["Retry-After"]) <= 60
    assert "_auth_user_id" not in client.session
    wait_out(61)
    # The lock is over; one more wrong password locks the pair twice as long.
    again = sign_in(client, "student", "wrong", ATTACKER)
    assert again.status_code == 429 and int(again["Retry-After"]) == 120
    wait_out(61)  # half way through the second lock: still locked
    still = sign_in(client, "student", "student-pass-123", ATTACKER)
    assert still.status_code == 429 and 50 <= int(still["Retry-After"]) <= 59
    assert sign_in(Client(), "student", "student-pass-123", HOME).status_code == 302  # elsewhere: at once
    wait_out(60)
    third = sign_in(client, "student", "wrong", ATTACKER)
    assert third.status_code == 429 and int(third["Retry-After"]) == 200  # 240, capped at 200
    wait_out(201)
    assert sign_in(client, "student", "student-pass-123", ATTACKER).status_code == 302
    # A correct sign-in forgives the pair: the count starts again.
    assert [sign_in(Client(), "student", "wrong", ATTACKER).status_code for _ in range(3)] == [200, 200, 429]
    assert int(AccessAttempt.objects.get().failures_since_start) == 3


@pytest.mark.django_db
def test_failures_are_remembered_past_a_lock_but_not_past_the_memory(client, student, settings):
    settings.LOGIN_MAX_FAILURES = 2
    settings.LOGIN_LOCKOUT_SECONDS = 10
    settings.LOGIN_LOCKOUT_MAX_SECONDS = 1000
    settings.LOGIN_FAILURE_MEMORY = 3600
    assert [sign_in(client, "student", "wrong", ATTACKER).status_code for _ in range(2)] == [200, 429]
    wait_out(600)  # long past the 10 s lock, within the memory: the next failure locks for 20 s
    assert int(sign_in(client, "student", "wrong", ATTACKER)["Retry-After"]) == 20
    wait_out(3601)  # forgotten: two tries again before a 10 s lock
    codes = [sign_in(client, "student", "wrong", ATTACKER) for _ in range(2)]
    assert [r.status_code for r in codes] == [200, 429] and int(codes[-1]["Retry-After"]) == 10


@pytest.mark.django_db
def test_a_good_login_is_not_throttled(client, student, settings):
    settings.LOGIN_MAX_FAILURES = 3
    sign_in(client, "student", "wrong", HOME)
    assert sign_in(client, "student", "student-pass-123", HOME).status_code == 302
    # Success forgives the pair's failures: two more mistakes later are not a lockout.
    assert [sign_in(Client(), "student", "wrong", HOME).status_code for _ in range(2)] == [200, 200]


@pytest.mark.django_db
def test_signup_is_throttled_per_address(settings):
    settings.SIGNUP_MAX_PER_ADDRESS = 3
    url = reverse("courseapp:signup")

    def sign_up(name, address):
        return Client().post(url, {"username": name, "password1": "a-long-pass-123", "password2": "a-long-pass-123"},
                             REMOTE_ADDR=address)

    assert [sign_up(f"bot{i}", ATTACKER).status_code for i in range(3)] == [302, 302, 302]
    refused = sign_up("bot3", ATTACKER)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many new accounts from your network address" in refused.content.decode()
    assert not User.objects.filter(username="bot3").exists()
    assert sign_up("neighbour", HOME).status_code == 302  # another address is not affected


def test_secret_key_comes_from_env_or_the_install_file(tmp_path):
    key_file = tmp_path / "var" / "secret_key"
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY"):
        secret_key(key_file)
    assert ensure_key_file(key_file) and not ensure_key_file(key_file)
    assert len(secret_key(key_file)) >= 50 and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert secret_key(key_file, "from-the-environment") == "from-the-environment"  # DJANGO_SECRET_KEY
    assert _settings_value("settings.SECRET_KEY", DJANGO_SECRET_KEY="from-the-environment") == "from-the-environment"


def _settings_value(expr: str, **env) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    environment.update(env, DJANGO_SETTINGS_MODULE="inferencelab.settings")
    code = f"import django; django.setup(); from django.conf import settings; print({expr})"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def test_debug_is_off_unless_asked_for():
    assert _settings_value("settings.DEBUG") == "False"
    assert _settings_value("settings.DEBUG", DJANGO_DEBUG="1") == "True"


def test_check_deploy_passes_with_the_documented_production_settings():
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    environment.update(DJANGO_HTTPS="1", DJANGO_SECRET_KEY="k" * 20 + os.urandom(24).hex(),
                       DJANGO_ALLOWED_HOSTS="course.example.org")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                            env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
def test_every_page_carries_the_csp(client, course):
    for url in ("/", reverse("courseapp:module", args=["intro"]), "/demos/", reverse("login"), "/no-such-page/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-eval" not in policy and "object-src 'none'" in policy


@pytest.fixture
def admin_client(client, course):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("admin", password="admin-pass-123"))
    return client


def _admin_module_data(module, **changes):
    data = {"title": module.title, "short_title": "", "slug": module.slug, "track": module.track_id, "order": 1,
            "prerequisites": "[]", "summary": "", "draft": "", "source": module.source,
            "questions-TOTAL_FORMS": "0", "questions-INITIAL_FORMS": "0"}
    return {**data, **changes}


@pytest.mark.django_db
def test_admin_refuses_malformed_prerequisites_and_the_index_survives_bad_rows(admin_client):
    intro = Module.objects.get(slug="intro")
    url = reverse("admin:courseapp_module_change", args=[intro.pk])
    for bad, message in (('[["x"]]', "list of module slugs"), ('["no-such-module"]', "No module with slug"),
                         ('["intro"]', "its own prerequisite")):
        response = admin_client.post(url, _admin_module_data(intro, prerequisites=bad))
        assert response.status_code == 200 and message in response.content.decode(), bad
    intro.refresh_from_db()
    assert intro.prerequisites == [] or all(isinstance(s, str) for s in intro.prerequisites)
    Module.objects.filter(pk=intro.pk).update(prerequisites=[["x"], 3])  # written around the forms
    admin_client.logout()
    assert admin_client.get("/").status_code == 200
    assert admin_client.get(reverse("courseapp:module", args=["intro"])).status_code == 200


@pytest.mark.django_db
def test_admin_refuses_a_lesson_with_a_content_error(admin_client):
    intro = Module.objects.get(slug="intro")
    before = (intro.source, intro.html)
    url = reverse("admin:courseapp_module_change", args=[intro.pk])
    response = admin_client.post(url, _admin_module_data(intro, source="## Fine\n\n:::{demo} no-such-demo\n:::\n"))
    assert response.status_code == 200 and "Line 3" in response.content.decode()
    intro.refresh_from_db()
    assert (intro.source, intro.html) == before  # nothing stored: source and HTML still agree


@pytest.mark.django_db
def test_admin_cannot_upload_narration_files(admin_client):
    from narration.admin import NarrationAdmin

    assert {"audio", "vtt"} <= set(NarrationAdmin.readonly_fields)


def test_demo_props_are_not_saved_unchecked_when_the_tokenizer_is_missing(monkeypatch):
    from django.apps import apps

    from courseapp.rendering import ContentError, render_markdown

    def broken(model):
        raise OSError("tokenizer.json not found")

    monkeypatch.setattr(apps.get_app_config("demos").tokenizers, "get", broken)
    with pytest.raises(ContentError, match="cannot be checked on this server"):
        render_markdown(':::{demo} kv-cache\n{"prompt": "Hi", "max_new_tokens": 100000}\n:::\n')
