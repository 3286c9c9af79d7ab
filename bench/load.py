#!/usr/bin/env python3
"""Load test: N concurrent websocket clients run demos against a running stack (`make run`).

    .venv/bin/python bench/load.py --url http://127.0.0.1:8000 [--clients 50] [--runs 2] [--max-new-tokens 8]

Each client comes from its own loopback address (127.0.0.2, 127.0.0.3, … against an IPv4 loopback URL: every
address holds at most its fair share of the worker slots, as distinct students' machines do), gets its own
session if the demo page sets one (GET of the page), opens /ws/demos/, and starts its runs one
after another with distinct prompts (so nothing is served from the replay cache unless --replay).
Reports runs completed, events lost or duplicated (seq must be 0..n-1 and match the run's
n_generated), errors by code, and worker→client latency p50/p99 (from the worker's publish time
`ts` on live event frames; same machine clock), the engine's batch size as each token saw it (how
many students' sequences shared that forward pass), and the queue positions runs were told while
they waited. Bounded: every client stops after --timeout seconds.
Only loopback targets are allowed.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
import urllib.parse
from collections import Counter

from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def source_address(i: int, base: str) -> tuple[str, int] | None:
    """Client i's own loopback address (Linux routes all of 127.0.0.0/8 to this machine); None for ::1."""
    if not (urllib.parse.urlparse(base).hostname or "").startswith("127."):
        return None
    n = i + 2
    return (f"127.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}", 0)


def session_cookie(base: str, source: tuple[str, int] | None) -> str:
    """The session cookie the demo page sets, or "" (a visitor who has done nothing gets none: the socket's
    runs then belong to its client address, which is this client's own)."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30, source_address=source)
    try:
        conn.request("GET", "/demos/kv-cache/")
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    for name, header in resp.getheaders():
        if name.lower() == "set-cookie" and header.startswith("sessionid="):
            return header.split(";", 1)[0]
    return ""


class Client(WebSocketClientProtocol):
    def onOpen(self):
        self.factory.opened.set_result(self)

    def onMessage(self, payload, is_binary):
        self.factory.inbox.put_nowait((time.time(), json.loads(payload.decode())))

    def onClose(self, was_clean, code, reason):
        if not self.factory.opened.done():
            self.factory.opened.set_exception(ConnectionError(f"closed: {code} {reason}"))
        self.factory.inbox.put_nowait((time.time(), {"type": "_closed"}))

    def send_json(self, obj):
        self.sendMessage(json.dumps(obj).encode())


async def connect(base: str, cookie: str, source: tuple[str, int] | None = None):
    u = urllib.parse.urlparse(base)
    ws_url = f"{'wss' if u.scheme == 'https' else 'ws'}://{u.netloc}/ws/demos/"
    factory = WebSocketClientFactory(ws_url, origin=base, headers={"Cookie": cookie} if cookie else {})
    factory.protocol = Client
    factory.inbox = asyncio.Queue()
    factory.opened = asyncio.get_running_loop().create_future()
    await asyncio.get_running_loop().create_connection(factory, u.hostname, u.port or 80, local_addr=source)
    proto = await asyncio.wait_for(factory.opened, 30)
    return proto, factory.inbox


async def client(i: int, args, results: dict, deadline: float):
    source = source_address(i, args.url)
    cookie = await asyncio.to_thread(session_cookie, args.url, source)
    proto, inbox = await connect(args.url, cookie, source)
    try:
        for j in range(args.runs):
            prompt = args.prompt if args.replay else f"Client {i}, run {j} ({args.nonce}): {args.prompt}"
            params = {"prompt": prompt, "max_new_tokens": args.max_new_tokens, "use_cache": True,
                      "temperature": 0.0}
            t0 = time.time()
            proto.send_json({"action": "start", "demo": "kv-cache", "params": params, "ref": f"{i}-{j}"})
            seqs, first_token_at, final = [], None, None
            while final is None:
                left = deadline - time.time()
                if left <= 0:
                    results["timeouts"] += 1
                    return
                try:
                    at, frame = await asyncio.wait_for(inbox.get(), left)
                except asyncio.TimeoutError:
                    results["timeouts"] += 1
                    return
                kind = frame.get("type")
                if kind == "event":
                    seqs.append(frame["seq"])
                    if "ts" in frame:
                        results["latency"].append(at - frame["ts"])
                    if frame["event"].get("type") == "token":
                        results["batch_sizes"].append(frame["event"].get("batch_size", 1))
                        if first_token_at is None:
                            first_token_at = at
                elif kind == "queued":
                    results["queue_positions"].append(frame["position"])
                elif kind in ("done", "error", "_closed"):
                    final = frame
            if final["type"] != "done":
                results["errors"][final.get("code", final["type"])] += 1
                if final.get("retry_after"):
                    await asyncio.sleep(min(final["retry_after"], 10))
                continue
            expected = final["summary"].get("n_generated", 0) + 2  # run_started + tokens + run_finished
            results["completed"] += 1
            results["replayed"] += bool(final.get("replayed_from"))
            results["events"] += len(seqs)
            results["lost"] += max(0, expected - len(set(seqs)))
            results["duplicates"] += len(seqs) - len(set(seqs))
            results["out_of_order"] += seqs != sorted(seqs)
            results["tokens"] += final["summary"].get("n_generated", 0)
            results["run_s"].append(time.time() - t0)
            if first_token_at:
                results["ttft_client"].append(first_token_at - t0)
    finally:
        proto.sendClose()


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _floor_receiver(conn, stop) -> None:
    delays = []
    while not stop.is_set() or conn.poll():
        if conn.poll(0.1):
            delays.append(time.time() - conn.recv())
    conn.send(delays)


class Floor:
    """The host's own wake-up latency while the benchmark runs: one process sends its clock every 20 ms through a
    pipe to another that does nothing else (one hop; no Redis, no Daphne, no GIL shared with busy threads). A
    worker→client event takes four hops (worker, Redis, Daphne, client), two of them into processes whose other
    threads are busy; a high floor says the host's other tenants, not the stack, make the tail."""

    def __init__(self):
        self.stop = multiprocessing.Event()
        self.parent, child = multiprocessing.Pipe()
        self.proc = multiprocessing.Process(target=_floor_receiver, args=(child, self.stop), daemon=True)
        self.proc.start()
        self.sender = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while True:
            self.parent.send(time.time())
            await asyncio.sleep(0.02)

    def finish(self) -> list[float]:
        self.sender.cancel()
        self.stop.set()
        delays = self.parent.recv()
        self.proc.join(5)
        return delays


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


async def main_async(args) -> dict:
    results = {"completed": 0, "replayed": 0, "events": 0, "lost": 0, "duplicates": 0, "out_of_order": 0,
               "tokens": 0, "timeouts": 0, "errors": Counter(), "latency": [], "run_s": [], "ttft_client": [],
               "batch_sizes": [], "queue_positions": []}
    load_before = os.getloadavg()
    floor = Floor()
    t0 = time.time()
    deadline = t0 + args.timeout
    try:
        await asyncio.gather(*(client(i, args, results, deadline) for i in range(args.clients)),
                             return_exceptions=False)
    finally:
        floor_delays = floor.finish()
    wall = time.time() - t0
    lat = results.pop("latency")
    run_s = results.pop("run_s")
    ttft = results.pop("ttft_client")
    batches = results.pop("batch_sizes")
    positions = results.pop("queue_positions")
    results["errors"] = dict(results["errors"])
    results.update({
        "clients": args.clients, "runs_per_client": args.runs, "max_new_tokens": args.max_new_tokens,
        "wall_s": round(wall, 2), "tokens_per_s": round(results["tokens"] / wall, 2) if wall else 0,
        "latency_ms_p50": round(pct(lat, 50) * 1000, 2), "latency_ms_p95": round(pct(lat, 95) * 1000, 2),
        "latency_ms_p99": round(pct(lat, 99) * 1000, 2), "latency_samples": len(lat),
        # the host while it ran: one-hop wake-up latency beside the stack's four hops, and its load
        "host_floor_ms_p50": round(pct(floor_delays, 50) * 1000, 2),
        "host_floor_ms_p99": round(pct(floor_delays, 99) * 1000, 2),
        "cpu": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "load_average_before_after": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
        "run_s_p50": round(pct(run_s, 50), 2), "run_s_max": round(max(run_s), 2) if run_s else None,
        "client_ttft_s_p50": round(pct(ttft, 50), 3) if ttft else None,
        "client_ttft_s_mean": round(statistics.mean(ttft), 3) if ttft else None,
        "mean_batch_size": round(statistics.mean(batches), 2) if batches else None,
        "max_batch_size": max(batches) if batches else None,
        "queued_frames": len(positions), "max_queue_position": max(positions) if positions else None,
    })
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--runs", type=int, default=2, help="runs per client, one after another")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--replay", action="store_true", help="same prompt for all: exercise the replay cache")
    ap.add_argument("--timeout", type=float, default=300, help="hard stop for the whole benchmark (s)")
    args = ap.parse_args()
    args.nonce = os.urandom(3).hex()  # distinct from an earlier benchmark's prompts: nothing replayed from those
    host = urllib.parse.urlparse(args.url).hostname or ""
    if not host.startswith(LOOPBACK):
        sys.exit("bench/load.py only targets a stack on this machine (loopback addresses)")
    results = asyncio.run(main_async(args))
    print(json.dumps(results, indent=2))
    ok = results["lost"] == 0 and results["duplicates"] == 0 and results["completed"] == args.clients * args.runs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
