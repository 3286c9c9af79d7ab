"""Real HTTP and websocket clients from a chosen source address, for tests through a real proxy or Daphne.

Linux routes all of 127.0.0.0/8 to loopback, so binding the client socket to 127.0.0.2, 127.0.0.3, … gives
each test client its own real address, as distinct visitors have. No mocks: the bytes on the wire are what a
browser sends (a masked text frame per message; pings answered).
"""
from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import struct
import urllib.parse


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, path: str, source: str, headers: dict | None = None) -> "WebSocket":
        """A websocket to 127.0.0.1:`port` from `source`; raises ConnectionRefusedError when not upgraded."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", f"Origin: http://127.0.0.1:{port}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise ConnectionRefusedError(head.split(b"\r\n", 1)[0].decode("latin-1"))
        return cls(reader, writer)

    async def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        size = len(payload)
        head = bytes([0x80 | opcode])
        if size < 126:
            head += bytes([0x80 | size])
        elif size < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", size)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", size)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        await self.writer.drain()

    async def send(self, obj: dict) -> None:
        await self._frame(0x1, json.dumps(obj).encode())

    async def recv(self, timeout: float = 30.0) -> dict | None:
        """The next text frame as JSON; None once the server closed the socket."""
        while True:
            first, second = await asyncio.wait_for(self.reader.readexactly(2), timeout)
            opcode, size = first & 0x0F, second & 0x7F
            if size == 126:
                size = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(size)
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                await self._frame(0xA, payload)
            elif opcode == 0x1:
                return json.loads(payload)

    async def close(self) -> None:
        try:
            await self._frame(0x8, struct.pack("!H", 1000))
        except (ConnectionError, RuntimeError):
            pass
        self.writer.close()


class Browser:
    """HTTP from one source address with a cookie jar (what a sign-in form needs: the CSRF cookie and token)."""

    def __init__(self, port: int, source: str, headers: dict | None = None):
        self.port, self.source, self.headers, self.cookies = port, source, headers or {}, {}

    def request(self, method: str, path: str, form: dict | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(self.source, 0))
        body = urllib.parse.urlencode(form) if form is not None else None
        sent = {**self.headers, **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                self.cookies[key.strip()] = rest.split(";", 1)[0]
        return response.status, dict(response.getheaders()), text

    def sign_in(self, username: str, password: str, headers: dict | None = None) -> tuple[int, str]:
        self.request("GET", "/accounts/login/", headers=headers)
        status, _, text = self.request("POST", "/accounts/login/", {
            "username": username, "password": password, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")},
            headers=headers)
        return status, text
