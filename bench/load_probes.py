"""What bench/load.py measures beside its demo clients (issues 38 and 43): page latency while the load runs, the web
server's CPU while it should be idle, sockets held open and doing nothing, and a flood of sockets dropped the way a
client that gives up drops them.

Loopback only, like load.py: every address used here is in 127.0.0.0/8, which Linux routes to this machine.
"""
from __future__ import annotations

import asyncio
import base64
import http.client
import os
import threading
import time
import urllib.parse

import psutil
from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


class PageProbe:
    """GET `path` every `interval` seconds on a fresh connection (what a new visitor's first page costs), in a
    thread of its own, so that the clients' event loop neither delays nor is delayed by it. Latencies in seconds;
    a failed request counts as the time it took to fail and is counted in `failures`."""

    def __init__(self, base: str, path: str = "/", interval: float = 0.25) -> None:
        u = urllib.parse.urlparse(base)
        self.host, self.port, self.path, self.interval = u.hostname, u.port or 80, path, interval
        self.latencies: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PageProbe":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopping.is_set():
            t0 = time.monotonic()
            try:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                conn.request("GET", self.path)
                resp = conn.getresponse()
                resp.read()
                conn.close()
                if resp.status >= 500:
                    self.failures += 1
            except OSError:
                self.failures += 1
            self.latencies.append(time.monotonic() - t0)
            self.stopping.wait(self.interval)

    def stop(self) -> dict:
        self.stopping.set()
        self.thread.join(35)
        lat = self.latencies
        return {"page_requests": len(lat), "page_failures": self.failures,
                "page_ms_p50": round(pct(lat, 50) * 1000, 1), "page_ms_p99": round(pct(lat, 99) * 1000, 1),
                "page_ms_max": round(max(lat) * 1000, 1) if lat else None}


def server_pid(port: int) -> int | None:
    """The process listening on `port` here (Daphne), or None."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


def server_rss_mb(pid: int | None) -> float | None:
    """The process's resident memory in MB (issue 43: 1 GB after the flood, until restarted)."""
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1) if pid else None


def cpu_percent_each_second(pid: int, seconds: int) -> list[float]:
    """The process's CPU use (percent of one core) in each of the next `seconds` seconds."""
    proc = psutil.Process(pid)
    out = []
    for _ in range(seconds):
        before, t0 = proc.cpu_times(), time.monotonic()
        time.sleep(1.0)
        after = proc.cpu_times()
        used = (after.user - before.user) + (after.system - before.system)
        out.append(round(100 * used / (time.monotonic() - t0), 1))
    return out


def loopback(i: int, first_octet: int = 1) -> str:
    """The i-th address of 127.<first_octet>.0.0/16 (1-based in the last octet: never a .0)."""
    return f"127.{first_octet}.{i // 250 % 250}.{i % 250 + 1}"


class Quiet(WebSocketClientProtocol):
    """A socket that only answers the server's pings (autobahn does) and notes when it is closed."""

    def onOpen(self):
        self.factory.opened.set_result(self)

    def onClose(self, was_clean, code, reason):
        if not self.factory.opened.done():
            self.factory.opened.set_exception(ConnectionError(f"closed: {code} {reason}"))
        self.factory.closed.append(code)


class IdleSockets:
    """`n` run sockets that do nothing, each from an address of its own (127.1.x.y: one visitor each, as a lecture
    hall of open tabs is), kept open while the load runs."""

    def __init__(self, base: str, n: int) -> None:
        self.base, self.n = base, n
        self.protocols: list[Quiet] = []
        self.closed: list[int] = []
        self.failed = 0

    async def open(self, batch: int = 100) -> None:
        u = urllib.parse.urlparse(self.base)
        loop = asyncio.get_running_loop()

        async def one(i: int) -> None:
            factory = WebSocketClientFactory(f"ws://{u.netloc}/ws/demos/", origin=self.base)
            factory.protocol, factory.opened, factory.closed = Quiet, loop.create_future(), self.closed
            try:
                await loop.create_connection(factory, u.hostname, u.port or 80, local_addr=(loopback(i), 0))
                self.protocols.append(await asyncio.wait_for(factory.opened, 60))
            except (OSError, ConnectionError, asyncio.TimeoutError):
                self.failed += 1

        for start in range(0, self.n, batch):
            await asyncio.gather(*(one(i) for i in range(start, min(self.n, start + batch))))

    def report(self) -> dict:
        return {"idle_sockets": self.n, "idle_sockets_opened": len(self.protocols), "idle_sockets_failed": self.failed,
                "idle_sockets_closed_by_server": len(self.closed)}

    def close(self) -> None:
        for proto in self.protocols:
            proto.sendClose()


async def drop_flood(base: str, n: int, batch: int = 200) -> dict:
    """Open `n` run sockets and drop each without a closing handshake (the TCP connection reset), half of them
    before the server's answer and half after it: what a client flooding the server and giving up does. Daphne
    ends such consumers with `websocket.disconnect`, or by cancelling them when they are too busy to take it."""
    u = urllib.parse.urlparse(base)
    host, port = u.hostname, u.port or 80
    dropped = failed = 0

    async def one(i: int) -> None:
        nonlocal dropped, failed
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, local_addr=(loopback(i, first_octet=2), 0)), 30)
        except (OSError, asyncio.TimeoutError):
            failed += 1
            return
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET /ws/demos/ HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {base}\r\n\r\n").encode())
        try:
            if i % 2:
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            else:
                await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        writer.transport.abort()  # a reset, no close frame: the consumer hears of it only from Daphne
        dropped += 1

    for start in range(0, n, batch):
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + batch))))
    return {"dropped_sockets": dropped, "drop_connect_failures": failed}
