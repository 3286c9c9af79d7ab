"""The client address every per-address limit counts (inferencelab/client_address.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from inferencelab.client_address import for_scope, normalize, resolve


@pytest.mark.parametrize("peer, header, trusted, expected", [
    ("203.0.113.5", None, 0, "203.0.113.5"),
    ("203.0.113.5", "127.0.0.1", 0, "203.0.113.5"),  # no proxy configured: the header is the client's words
    ("127.0.0.1", "198.51.100.7", 1, "198.51.100.7"),  # nginx's $remote_addr
    ("127.0.0.1", "unknown, 10.0.0.1, 127.0.0.1, 198.51.100.7", 1, "198.51.100.7"),  # forged entries to its left
    ("127.0.0.1", "1.1.1.1, 198.51.100.7, 10.0.0.2", 2, "198.51.100.7"),  # two proxies: the second from the right
    ("127.0.0.1", "198.51.100.7", 2, "198.51.100.7"),  # fewer entries than proxies: the left-most present
    ("127.0.0.1", None, 1, "127.0.0.1"),  # no header at all: the peer, capped like anyone
    ("127.0.0.1", " , ", 1, "127.0.0.1"),
    ("127.0.0.1", "unknown", 1, "unknown"),  # not an address: one shared, capped bucket
    ("127.0.0.1", "198.51.100.7:4711", 1, "198.51.100.7"),
    ("127.0.0.1", "[2001:db8::1]:443", 1, "2001:db8::1"),
    ("::ffff:192.0.2.1", None, 0, "192.0.2.1"),
    (None, None, 0, "unknown"),  # a scope without a client (an in-process test) is not exempt either
])
def test_the_client_is_the_right_most_untrusted_entry(peer, header, trusted, expected):
    assert resolve(peer, header, trusted) == expected


def test_normalize_gives_one_spelling_per_address():
    assert normalize("2001:DB8:0:0::1") == normalize("2001:db8::1") == "2001:db8::1"
    assert normalize("fe80::1%eth0") == "fe80::1" and normalize("") == normalize("garbage") == "unknown"


def test_websocket_scopes_read_every_forwarded_header(settings):
    settings.TRUSTED_PROXIES = 1
    scope = {"client": ("127.0.0.1", 5000),
             "headers": [(b"x-forwarded-for", b"6.6.6.6"), (b"X-Forwarded-For", b"10.0.0.1, 198.51.100.9")]}
    assert for_scope(scope) == "198.51.100.9"
    settings.TRUSTED_PROXIES = 0
    assert for_scope(scope) == "127.0.0.1"


def test_the_server_refuses_daphnes_proxy_headers():
    result = subprocess.run([sys.executable, "-m", "inferencelab.server", "--proxy-headers", "-p", "1",
                             "inferencelab.asgi:application"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "TRUSTED_PROXIES" in result.stderr
