"""Websocket origin check: same origin as the page, port included.

Channels' `AllowedHostsOriginValidator` compares only the Origin's host name with ALLOWED_HOSTS, so a page
served by any other program on the same host (another port) could open sockets with the visitor's session
cookie. Here the Origin must equal the socket request's own scheme://host:port (its Host header), and that
host must be allowed; or the Origin must be listed in CSRF_TRUSTED_ORIGINS (a front-end on another origin).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


def _origin_tuple(scheme: str, netloc: str) -> tuple[str, str, str] | None:
    host, port = split_domain_port(netloc.lower())
    if not host:
        return None
    web_scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return web_scheme, host, port or DEFAULT_PORTS.get(web_scheme, "")


def origin_allowed(origin: str, host_header: str, socket_scheme: str) -> bool:
    parts = urlsplit(origin)
    seen = _origin_tuple(parts.scheme, parts.netloc)
    if seen is None:
        return False
    trusted = {_origin_tuple(urlsplit(o).scheme, urlsplit(o).netloc) for o in settings.CSRF_TRUSTED_ORIGINS}
    if seen in trusted:
        return True
    own = _origin_tuple(socket_scheme, host_header)
    return own is not None and seen == own and validate_host(own[1], settings.ALLOWED_HOSTS)


class SameOriginValidator:
    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers", []))
        origin = headers.get(b"origin", b"").decode("latin-1")
        host = headers.get(b"host", b"").decode("latin-1")
        if origin and host and origin_allowed(origin, host, scope.get("scheme", "ws")):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
