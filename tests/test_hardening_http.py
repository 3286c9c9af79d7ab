"""The web server's limits, tried from outside against a real Daphne started the way `make run` starts it
(`python -m inferencelab.server`): oversized and endless bodies, half-sent requests, silent connections."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
BODY_CAP = 64 * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """Daphne as `make run` starts it, on the (file) test database: sessions made in a test are its sessions."""
    from django.conf import settings

    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "daphne.log"
    env = {**os.environ, "REQUEST_MAX_BODY_BYTES": str(BODY_CAP), "REQUEST_HEADER_TIMEOUT": "1.5",
           "REQUEST_BODY_TIMEOUT": "2", "DJANGO_SETTINGS_MODULE": "inferencelab.settings",
           "DATABASE_URL": f"sqlite:///{settings.DATABASES['default']['TEST']['NAME']}"}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "inferencelab.server", "-b", "127.0.0.1", "-p", str(port),
                                 "inferencelab.asgi:application"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"server did not start:\n{log.read_text()}")
            time.sleep(0.2)
    yield port, proc
    proc.terminate()
    proc.wait(10)


def _exchange(port: int, request: bytes, read_timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as sock:
        sock.sendall(request)
        return _read_all(sock)


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError, socket.timeout):
        pass
    return data


def test_declared_oversized_body_is_refused_before_it_is_sent(server):
    port, _ = server
    started = time.monotonic()
    reply = _exchange(port, b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 209715200\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"larger than this server accepts" in reply
    assert time.monotonic() - started < 3  # answered from the headers, not after 200 MB


def test_streamed_body_past_the_cap_is_cut_off_and_not_buffered(server):
    port, proc = server
    rss_before = psutil.Process(proc.pid).memory_info().rss
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b"a" * (1 << 20))
        try:
            for _ in range(64):  # up to 64 MiB, if the server kept reading
                sock.sendall(chunk)
                sent += 1
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = _read_all(sock)
    assert sent < 64, "the server kept reading a body 1000x its cap"
    assert reply == b"" or reply.startswith(b"HTTP/1.1 413")
    assert psutil.Process(proc.pid).memory_info().rss - rss_before < 32 * 1024 * 1024
    assert _exchange(port, b"GET /static/js/demo-embed.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                     ).startswith(b"HTTP/1.1 200")


def test_half_sent_headers_get_408_and_the_connection_is_dropped(server):
    port, _ = server
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes its headers
        for _ in range(3):
            time.sleep(0.4)
            sock.sendall(b"X-Slow: 1\r\n")  # trickling headers does not buy time
        reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert time.monotonic() - started < 5


def test_half_sent_body_gets_408(server):
    port, _ = server
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
        reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert time.monotonic() - started < 6


def test_silent_connection_is_closed(server):
    port, _ = server
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert _read_all(sock) == b""  # closed by the server, not by our timeout
    assert time.monotonic() - started < 5


def test_upload_paths_get_the_larger_cap(settings):
    from inferencelab import server as limited

    limited._limits.cache_clear()
    try:
        assert limited.body_limit(b"/author/intro/narration/upload/") == settings.UPLOAD_MAX_BODY_BYTES
        assert limited.body_limit(b"/author/import/?x=1") == settings.UPLOAD_MAX_BODY_BYTES
        assert limited.body_limit(b"/admin/narration/narration/3/change/") == settings.REQUEST_MAX_BODY_BYTES
        assert limited.body_limit(b"/accounts/login/") == settings.REQUEST_MAX_BODY_BYTES
        assert limited.body_limit(b"/author/intro/narration/upload/../../x") == settings.REQUEST_MAX_BODY_BYTES
    finally:
        limited._limits.cache_clear()


# --- Uploads: the sender is checked before the body is read -------------------------------------------------------

UPLOAD_PATHS = [b"/author/import/", b"/author/intro/narration/upload/"]
BIG = 200 * 1024 * 1024


def _session_cookie(user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _user(name: str, *, instructor: bool):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(name, password=f"{name}-pass-123")
    if instructor:
        user.user_permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    return user


def _upload_head(path: bytes, length: int, cookie: str = "", extra: bytes = b"",
                 content_type: bytes = b"multipart/form-data; boundary=XyZ") -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n"
            % (path, content_type, length, f"Cookie: {cookie}\r\n".encode() if cookie else b"", extra))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", UPLOAD_PATHS)
@pytest.mark.parametrize("who", ["anonymous", "forged session", "student"])
def test_a_large_upload_from_anyone_but_an_instructor_is_refused_before_its_body_is_read(server, path, who):
    port, _ = server
    if who == "student":
        cookie = "sessionid=" + _session_cookie(_user("student", instructor=False))
    else:
        cookie = "sessionid=" + "a" * 32 if who == "forged session" else ""
    started = time.monotonic()
    reply = _exchange(port, _upload_head(path, BIG, cookie))  # headers only: the server answers without the body
    assert reply.startswith(b"HTTP/1.1 403"), reply[:200]
    assert b"only from a signed-in instructor" in reply
    assert time.monotonic() - started < 3


@pytest.mark.django_db(transaction=True)
def test_a_chunked_upload_of_unknown_size_is_checked_the_same_way(server):
    port, _ = server
    head = (b"POST /author/import/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=XyZ"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    reply = _exchange(port, head + b"5\r\nhello\r\n0\r\n\r\n")  # short, and all in the headers' packet
    assert reply.startswith(b"HTTP/1.1 403"), reply[:200]
    # An instructor's: held while the cookie is checked, then handed to the view, which answers it.
    cookie = f"sessionid={_session_cookie(_user('teacher', instructor=True))}; csrftoken={'c' * 32}"
    head = (b"POST /author/import/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded"
            b"\r\nTransfer-Encoding: chunked\r\nCookie: %s\r\nX-CSRFToken: %s\r\nConnection: close\r\n\r\n"
            % (cookie.encode(), b"c" * 32))
    reply = _exchange(port, head + b"c\r\narchive=none\r\n0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400") and b"Choose a .zip file to import." in reply, reply[:300]


def test_the_admin_narration_form_has_no_upload_allowance(server):
    """Its audio and cues are read-only there (uploaded on the authoring page): the ordinary cap, at once."""
    port, _ = server
    started = time.monotonic()
    reply = _exchange(port, _upload_head(b"/admin/narration/narration/1/change/", BIG))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - started < 3


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_200_mib_upload_is_cut_off_after_a_few_mib_and_not_buffered(server):
    port, proc = server
    rss_before = psutil.Process(proc.pid).memory_info().rss
    sent = 0
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(_upload_head(b"/author/import/", BIG))
        chunk = b"a" * (1 << 20)
        try:
            for _ in range(200):
                sock.sendall(chunk)
                sent += 1
        except (BrokenPipeError, ConnectionResetError, TimeoutError, socket.timeout):
            pass
        reply = _read_all(sock)
    assert sent < 32, f"the server read {sent} MiB of an anonymous upload"
    assert reply == b"" or reply.startswith(b"HTTP/1.1 403"), reply[:200]  # or reset, with the body unread
    assert psutil.Process(proc.pid).memory_info().rss - rss_before < 32 * 1024 * 1024


@pytest.mark.django_db(transaction=True)
def test_an_instructors_large_upload_is_read_and_reaches_the_view(server):
    port, _ = server
    cookie = f"sessionid={_session_cookie(_user('teacher', instructor=True))}; csrftoken={'c' * 32}"
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"archive\"; filename=\"course.zip\"\r\n"
            b"Content-Type: application/zip\r\n\r\n" + b"n" * (4 * BODY_CAP) + b"\r\n--XyZ--\r\n")
    head = _upload_head(b"/author/import/", len(body), cookie, b"X-CSRFToken: " + b"c" * 32 + b"\r\n"
                        b"Connection: close\r\n")
    reply = _exchange(port, head + body, read_timeout=20)
    # Not a zip: the import view itself says so (400), after the server read the whole body.
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"only from a signed-in instructor" not in reply


@pytest.mark.django_db(transaction=True)
def test_small_bodies_on_upload_paths_still_get_the_views_answer(server):
    port, _ = server
    body = b"archive=none"
    head = _upload_head(b"/author/import/", len(body), f"csrftoken={'c' * 32}",
                        b"X-CSRFToken: " + b"c" * 32 + b"\r\nConnection: close\r\n",
                        b"application/x-www-form-urlencoded")
    reply = _exchange(port, head + body)
    assert reply.startswith(b"HTTP/1.1 302") and b"/accounts/login/" in reply  # the login redirect, as before
