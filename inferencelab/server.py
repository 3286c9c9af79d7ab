"""Daphne with the limits a public server needs: `python -m inferencelab.server [daphne args] APP`.

Daphne (through Twisted) buffers a whole request body before the application sees a byte, then hands
it over all at once, so no ASGI middleware or Django setting can stop a 200 MB body from being read
(measured: Daphne grew from 350 MB to 2.7 GB). This launcher runs Daphne's own command line with a
request class that enforces, at the socket:

* a body cap, from Content-Length before anything is read and while a chunked body streams in:
  `REQUEST_MAX_BODY_BYTES` (1 MiB) everywhere, `UPLOAD_MAX_BODY_BYTES` (200 MiB) on the paths in
  `UPLOAD_BODY_PATHS` (the narration upload form, the course zip import). Over it: `413` and the connection
  is closed.
* on those paths, a body over the ordinary cap (or chunked, of unknown size) only from an instructor: the
  session cookie is checked (inferencelab/upload_guard.py, in a thread) while the body is held back at the
  socket; anyone else gets `403` without the body being read.
* a header deadline (`REQUEST_HEADER_TIMEOUT`, 10 s from the first byte of a request, or from the
  connection for its first request) and a body deadline (`REQUEST_BODY_TIMEOUT`, 60 s): a half-sent
  request gets `408` and is dropped instead of being held forever (slowloris).

Every figure is a Django setting read from the environment (inferencelab/settings.py). Daphne's
`--proxy-headers` is refused: the client address comes from inferencelab/client_address.py. The launcher also
starts the demos app's reaper thread (demos/reaper.py), so runs whose worker died are failed server-side.
"""
from __future__ import annotations

import os
import re
import sys
from functools import cache

from daphne import server as daphne_server  # first: it installs the asyncio reactor Daphne runs on
from daphne import http_protocol
from twisted.internet import reactor, threads


@cache
def _limits() -> tuple[int, int, re.Pattern, float, float]:
    from django.conf import settings  # configured by the time the first request arrives

    upload_paths = re.compile("|".join(f"(?:{p})" for p in settings.UPLOAD_BODY_PATHS) or r"(?!)")
    return (settings.REQUEST_MAX_BODY_BYTES, settings.UPLOAD_MAX_BODY_BYTES, upload_paths,
            settings.REQUEST_HEADER_TIMEOUT, settings.REQUEST_BODY_TIMEOUT)


def body_limit(path: bytes) -> int:
    """The largest body accepted for a request path (query string ignored)."""
    default, upload, upload_paths, _, _ = _limits()
    path_only = path.split(b"?", 1)[0].decode("latin-1")
    return upload if upload_paths.match(path_only) else default


def needs_uploader(path: bytes, length: int | None) -> bool:
    """Whether a body must wait for the sender's upload permission: over the ordinary cap (or of unknown
    length) on a path whose cap is larger."""
    default = _limits()[0]
    return body_limit(path) > default and (length is None or length > default)


REASONS = {403: b"Forbidden", 408: b"Request Timeout", 413: b"Content Too Large"}
MESSAGES = {
    403: b"uploads this large are accepted only from a signed-in instructor; sign in and send it again.\n",
    408: b"the request was not sent in time.\n",
    413: b"the request body is larger than this server accepts here.\n",
}


class LimitedWebRequest(http_protocol.WebRequest):
    """Daphne's request with a body cap and header/body deadlines.

    Invariant: once `_rejected` is set, nothing of this request reaches the application and no further
    body byte is kept; the client has been sent one error response and the connection is closing. While
    `_authorizing`, the connection reads nothing more (at most the rest of the packet the headers came in)
    and the request is not handed on.
    """

    def __init__(self, *args, **kwargs):
        self._rejected = False
        self._received = 0
        self._limit = 0
        self._deadline = None
        self._authorizing = False
        self._held = None  # requestReceived's arguments, when the body ended before the upload check did
        super().__init__(*args, **kwargs)
        if self.channel is not None:
            self.channel.inferencelab_started = True  # the connection's first-request deadline is met
        self._arm(_limits()[3])  # the request line has arrived: the rest of the headers have this long

    def _arm(self, seconds: float | None) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = reactor.callLater(seconds, self._reject, 408) if seconds else None

    def _reject(self, status: int) -> None:
        if self._rejected:
            return
        self._rejected = True
        self._arm(None)
        body = b"%d %s: %s" % (status, REASONS[status], MESSAGES[status])
        transport = self.channel.transport if self.channel is not None else None
        if transport is None:
            return
        transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n%s" % (status, REASONS[status], len(body), body))
        transport.loseConnection()

    def gotLength(self, length):
        """All headers are in: check the declared length, and on an upload path the sender, before a byte of
        body is read."""
        path = self.channel._path if self.channel is not None else b"/"
        self._limit = body_limit(path)
        if length is not None and length > self._limit:
            super().gotLength(0)
            self._reject(413)
            return
        super().gotLength(length)
        self._arm(_limits()[4] if length != 0 else None)
        if needs_uploader(path, length):
            self._hold_body()

    def _hold_body(self) -> None:
        """Stop reading until the session cookie is known to be an instructor's (or not: 403)."""
        from django.conf import settings

        from .upload_guard import may_send_large_body  # imports the auth app: only once Django is set up

        self._authorizing = True
        self.channel.transport.pauseProducing()
        session_key = self.received_cookies.get(settings.SESSION_COOKIE_NAME.encode(), b"").decode("latin-1")
        checked = threads.deferToThread(may_send_large_body, session_key)
        checked.addBoth(self._uploader_checked)

    def _uploader_checked(self, allowed) -> None:
        self._authorizing = False
        if self._rejected or self.channel is None or not getattr(self.channel.transport, "connected", 0):
            return
        if allowed is not True:  # False, or a Failure: refused either way
            self._reject(403)
            return
        self.channel.transport.resumeProducing()
        if self._held is not None:
            held, self._held = self._held, None
            super().requestReceived(*held)

    def handleContentChunk(self, data):
        if self._rejected:
            return
        self._received += len(data)
        if self._received > self._limit:  # a chunked body (no Content-Length) that keeps coming
            self._reject(413)
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        if self._rejected:
            return
        self._arm(None)
        if self._authorizing:  # a short chunked body, all in the headers' packet: handed on once allowed
            self._held = (command, path, version)
            return
        super().requestReceived(command, path, version)

    def connectionLost(self, reason):
        self._arm(None)
        super().connectionLost(reason)


class LimitedHTTPFactory(http_protocol.HTTPFactory):
    """Builds connections that must send their first request line within the header deadline."""

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        if protocol is not None:
            protocol.requestFactory = LimitedWebRequest
            channel = getattr(protocol, "_channel", protocol)
            channel.requestFactory = LimitedWebRequest

            def first_request_overdue():
                transport = channel.transport
                if not getattr(channel, "inferencelab_started", False) and getattr(transport, "connected", 0):
                    transport.abortConnection()

            reactor.callLater(_limits()[3], first_request_overdue)
        return protocol


def _settle() -> None:
    """Load what every request needs, then move it out of the garbage collector's sight.

    The web process never imports torch (inference_core resolves its names lazily and the demo checks
    import the engine only inside `run`), so it holds ~100k objects instead of ~1M; `gc.freeze()` then
    keeps even those out of the full collections that otherwise pause the event loop for tens of
    milliseconds under load (the p99 a student sees on a token).
    """
    import gc
    import importlib

    from django.conf import settings

    importlib.import_module(settings.ASGI_APPLICATION.rsplit(".", 1)[0])
    from demos import registry

    try:
        registry.count_tokens("warm")  # the tokenizer a prompt check needs, loaded once here
    except registry.DemoParamError:
        pass  # no model yet: the first prompt check says so clearly
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(settings.GIL_SWITCH_INTERVAL)  # the event loop's turns on the GIL (settings.py)


def refuse_proxy_headers(argv: list[str]) -> None:
    """Daphne's --proxy-headers makes the *left-most* X-Forwarded-For entry (written by the client) the peer,
    which would let any visitor choose its address; TRUSTED_PROXIES (inferencelab/client_address.py) reads the
    header instead, from the right."""
    if any(arg == "--proxy-headers" or arg.startswith("--proxy-headers-") for arg in argv):
        sys.exit("inferencelab.server: do not pass --proxy-headers (it trusts the client-written, left-most "
                 "X-Forwarded-For entry); set TRUSTED_PROXIES to the number of proxies in front instead")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    refuse_proxy_headers(argv)
    http_protocol.WebRequest = LimitedWebRequest  # what HTTPFactory.buildProtocol instantiates
    daphne_server.HTTPFactory = LimitedHTTPFactory
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
    import django

    django.setup()
    from demos import reaper

    reaper.start()  # fails runs whose worker died, even when no socket watches them
    _settle()
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(argv)


if __name__ == "__main__":
    main()
