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
def server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "daphne.log"
    env = {**os.environ, "REQUEST_MAX_BODY_BYTES": str(BODY_CAP), "REQUEST_HEADER_TIMEOUT": "1.5",
           "REQUEST_BODY_TIMEOUT": "2", "DJANGO_SETTINGS_MODULE": "inferencelab.settings"}
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
        assert limited.body_limit(b"/admin/courseapp/narration/3/change/?x=1") == settings.UPLOAD_MAX_BODY_BYTES
        assert limited.body_limit(b"/accounts/login/") == settings.REQUEST_MAX_BODY_BYTES
        assert limited.body_limit(b"/author/intro/narration/upload/../../x") == settings.REQUEST_MAX_BODY_BYTES
    finally:
        limited._limits.cache_clear()
