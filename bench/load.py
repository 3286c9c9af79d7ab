#!/usr/bin/env python3
"""Load test: N concurrent websocket clients run demos against a running stack (`make run`).

    .venv/bin/python bench/load.py --url http://127.0.0.1:8000 [--clients 50] [--runs 2] [--max-new-tokens 8]

Each client comes from its own loopback address (127.0.0.2, 127.0.0.3, … against an IPv4 loopback URL), or with
--one-address A all of them from A (a class behind one school's NAT, issue 38); it gets its own session with
--sessions (the POST a demo page makes before its first run), else none (its runs are then its address's). It
opens /ws/demos/ and starts its runs one after another with distinct prompts (so nothing is served from the replay
cache unless --replay).
Reports runs completed, events lost or duplicated (seq must be 0..n-1 and match the run's
n_generated), errors by code, and worker→client latency p50/p99 (from the worker's publish time
`ts` on live event frames; same machine clock), the engine's batch size as each token saw it (how
many students' sequences shared that forward pass), and the queue positions runs were told while
they waited. The frame gaps, the silences a student sees between one frame of a run and the next: from its first
event to its final frame (`frame_gap_s_*`: the run streaming), and from `accepted` to its first event
(`wait_gap_s_*`: while it waits, `queued` frames come on each change of place and at least every 5 s). Beside
them (bench/load_probes.py): `GET /` every 0.25 s (`page_ms_*`), --idle-sockets N sockets held open doing nothing
for the whole run (each from a 127.1.x.y address of its own) and the web server's CPU with them after the load
(`idle_cpu_pct`), and --drop-flood N sockets dropped without a close before the load, then the server's CPU each
second for --settle seconds, with nothing sent to it, and the page latency for 20 s after that (issue 43).
Bounded: every client stops after --timeout seconds.
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
from pathlib import Path

from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.load_probes import (IdleSockets, PageProbe, cpu_percent_each_second, drop_flood, pct,  # noqa: E402
                               server_pid, server_rss_mb)

LOOPBACK = ("127.", "localhost", "[::1]", "::1")


def source_address(i: int, base: str, one: str | None = None) -> tuple[str, int] | None:
    """Client i's own loopback address (Linux routes all of 127.0.0.0/8 to this machine), or `one` for all;
    None for ::1."""
    if not (urllib.parse.urlparse(base).hostname or "").startswith("127."):
        return None
    if one:
        return (one, 0)
    n = i + 2
    return (f"127.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}", 0)


def session_cookie(base: str, source: tuple[str, int] | None, visitor: bool = False) -> str:
    """The session cookie the demo page sets, or "" (a visitor who has done nothing gets none: the socket's
    runs then belong to its client address). `visitor`: ask for one as a page does before its first run."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30, source_address=source)
    try:
        if visitor:
            conn.request("POST", "/demos/visitor/", body=b"")
        else:
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
    source = source_address(i, args.url, args.one_address)
    cookie = await asyncio.to_thread(session_cookie, args.url, source, args.sessions)
    if args.sessions and not cookie:
        results["errors"]["no_session"] += 1  # the server refused one (its per-address quota): say so
    proto, inbox = await connect(args.url, cookie, source)
    try:
        for j in range(args.runs):
            prompt = args.prompt if args.replay else f"Client {i}, run {j} ({args.nonce}): {args.prompt}"
            params = {"prompt": prompt, "max_new_tokens": args.max_new_tokens, "use_cache": True,
                      "temperature": 0.0}
            if args.demo == "attention":
                params = {"prompt": prompt[:400], "layer": 0, "head": 0}
            elif args.demo == "paged-attention":  # one prompt: a small run that streams every step, no comparison
                params = {"prompts": prompt[:400], "max_new_tokens": args.max_new_tokens}
            t0 = time.time()
            proto.send_json({"action": "start", "demo": args.demo, "params": params, "ref": f"{i}-{j}"})
            seqs, first_token_at, final, last_at, streaming = [], None, None, None, False
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
                if last_at is not None:
                    results["frame_gaps" if streaming else "wait_gaps"].append(at - last_at)
                if kind == "accepted" or last_at is not None:
                    last_at = at
                if kind == "event":
                    streaming = True
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
            if args.demo != "kv-cache":  # no token count to check against: every seq up to the last one seen
                expected = max(seqs, default=-1) + 1
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


async def settle_after_flood(args, pid: int | None) -> dict:
    """Issue 43: the server's idle CPU for 10 s and its page latency for 20 s, then drop --drop-flood sockets and
    watch its CPU each second for --settle seconds with nothing else sent to it (a page probe would be load of its
    own), then the page latency for 20 s again."""
    before = await asyncio.to_thread(cpu_percent_each_second, pid, 10) if pid else []
    probe = PageProbe(args.url).start()  # the same page before, for the host's own tail (other tenants)
    await asyncio.sleep(20)
    page_before = probe.stop()
    rss_before = server_rss_mb(pid)
    flood = await drop_flood(args.url, args.drop_flood)
    cpu = await asyncio.to_thread(cpu_percent_each_second, pid, args.settle) if pid else []
    flood["server_rss_mb_before_after"] = [rss_before, server_rss_mb(pid)]
    probe = PageProbe(args.url).start()
    await asyncio.sleep(20)
    page = probe.stop()
    calm = next((i + 1 for i in range(len(cpu)) if all(c < 5.0 for c in cpu[i:])), None)
    return {"before_drop_cpu_pct_each_s": before, **{f"before_drop_{k}": v for k, v in page_before.items()},
            **flood, "after_drop_cpu_pct_each_s": cpu,
            "after_drop_s_until_cpu_stays_under_5pct": calm, **{f"after_drop_{k}": v for k, v in page.items()}}


async def main_async(args) -> dict:
    results = {"completed": 0, "replayed": 0, "events": 0, "lost": 0, "duplicates": 0, "out_of_order": 0,
               "tokens": 0, "timeouts": 0, "errors": Counter(), "latency": [], "run_s": [], "ttft_client": [],
               "batch_sizes": [], "queue_positions": [], "frame_gaps": [], "wait_gaps": []}
    pid = server_pid(urllib.parse.urlparse(args.url).port or 80)
    extra = {"server_pid_found": pid is not None}
    if args.drop_flood:
        extra.update(await settle_after_flood(args, pid))
    idle = IdleSockets(args.url, args.idle_sockets)
    if args.idle_sockets:
        await idle.open()
    load_before = os.getloadavg()
    floor = Floor()
    probe = PageProbe(args.url).start()
    t0 = time.time()
    deadline = t0 + args.timeout
    try:
        await asyncio.gather(*(client(i, args, results, deadline) for i in range(args.clients)),
                             return_exceptions=False)
    finally:
        floor_delays = floor.finish()
        extra.update(probe.stop())
    wall = time.time() - t0
    if args.idle_sockets:
        if pid:  # the server with only the idle sockets left: what their timers cost
            extra["idle_cpu_pct"] = (await asyncio.to_thread(cpu_percent_each_second, pid, 10))
        extra.update(idle.report())
        idle.close()
    lat = results.pop("latency")
    run_s = results.pop("run_s")
    ttft = results.pop("ttft_client")
    batches = results.pop("batch_sizes")
    positions = results.pop("queue_positions")
    gaps, waits = results.pop("frame_gaps"), results.pop("wait_gaps")
    results["errors"] = dict(results["errors"])
    results.update({
        "clients": args.clients, "runs_per_client": args.runs, "max_new_tokens": args.max_new_tokens,
        "one_address": args.one_address, "sessions": args.sessions,
        "wall_s": round(wall, 2), "tokens_per_s": round(results["tokens"] / wall, 2) if wall else 0,
        "latency_ms_p50": round(pct(lat, 50) * 1000, 2), "latency_ms_p95": round(pct(lat, 95) * 1000, 2),
        "latency_ms_p99": round(pct(lat, 99) * 1000, 2), "latency_samples": len(lat),
        "frame_gap_s_p99": round(pct(gaps, 99), 3), "frame_gap_s_max": round(max(gaps), 3) if gaps else None,
        "wait_gap_s_p99": round(pct(waits, 99), 3), "wait_gap_s_max": round(max(waits), 3) if waits else None,
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
        **extra,
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
    ap.add_argument("--one-address", default=None, help="every client from this loopback address (a NAT'd class)")
    ap.add_argument("--sessions", action="store_true", help="each client gets its own session (POST /demos/visitor/)")
    ap.add_argument("--demo", default="kv-cache", choices=("kv-cache", "attention", "paged-attention"),
                    help="kv-cache runs end with a comparison that holds the slot for minutes on a small CPU; "
                         "attention (one event) and paged-attention (one prompt, an event a step) are small runs")
    ap.add_argument("--idle-sockets", type=int, default=0, help="sockets held open, doing nothing, during the load")
    ap.add_argument("--drop-flood", type=int, default=0, help="sockets dropped without a close before the load")
    ap.add_argument("--settle", type=int, default=30, help="seconds the server is watched after the drop flood")
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
