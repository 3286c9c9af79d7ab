"""The one client address of an HTTP request or a websocket: what every per-address limit counts.

`TRUSTED_PROXIES` (a count, 0 by default) says how many reverse proxies stand in front of Daphne, each of
which appends the address it saw to `X-Forwarded-For` (nginx: `proxy_set_header X-Forwarded-For
$remote_addr;` on the outermost one). With N trusted proxies the client is the N-th entry from the right:
everything left of it was written by the client and is ignored. A header with fewer entries than that falls
back to its left-most entry, and no header at all to the socket peer. With 0 the header is ignored and the
socket peer is the client.

Invariant: the result is a normalized IP address (IPv4-mapped IPv6 as IPv4) or the literal `unknown` for an
entry that is not one; no value is ever exempt from a limit (loopback, private and `unknown` included), so a
client that forges the header gains nothing. Daphne must run without `--proxy-headers`, which would replace
the peer with the *left-most* entry (client-chosen); inferencelab/server.py refuses the flag.
"""
from __future__ import annotations

import ipaddress

from django.conf import settings

UNKNOWN = "unknown"


def normalize(value: str | None) -> str:
    """An address as one canonical string: `[::1]:80` → `::1`, `1.2.3.4:5` → `1.2.3.4`, junk → `unknown`."""
    text = (value or "").strip().strip('"')
    if text.startswith("["):  # [v6] or [v6]:port
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])  # a zone id names no other host
    except ValueError:
        return UNKNOWN
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip)


def resolve(peer: str | None, forwarded: str | None, trusted: int) -> str:
    """The client address from the socket peer and the `X-Forwarded-For` value(s) as received."""
    if trusted <= 0:
        return normalize(peer)
    entries = [e.strip() for e in (forwarded or "").split(",") if e.strip()]
    if not entries:
        return normalize(peer)
    return normalize(entries[-trusted] if len(entries) >= trusted else entries[0])


def trusted_proxies() -> int:
    return max(0, settings.TRUSTED_PROXIES)


def for_request(request) -> str:
    """The client address of a Django request (also django-axes' AXES_CLIENT_IP_CALLABLE)."""
    return resolve(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"), trusted_proxies())


def for_scope(scope) -> str:
    """The client address of an ASGI scope (a websocket's). Repeated headers are joined as HTTP joins them."""
    client = scope.get("client") or (None, None)
    forwarded = ",".join(value.decode("latin-1") for name, value in scope.get("headers") or ()
                         if name.lower() == b"x-forwarded-for")
    return resolve(client[0], forwarded, trusted_proxies())
