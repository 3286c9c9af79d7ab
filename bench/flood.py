#!/usr/bin/env python3
"""Page traffic beside a live run (issue 38): a live run's frame-gap p99 with and without a flood of lesson pages and
searches, interleaved, and their ratio (goal: at most 2).

    .venv/bin/python bench/flood.py --url http://127.0.0.1:8000 [--rounds 3] [--flood-clients 20] [--max-new-tokens 48]

Each round starts one live run alone (the baseline) and one live run while --flood-clients HTTP clients loop on
the course's lesson pages and on search (each on its own keep-alive connection, one request after another,
alternating a lesson and a search); which of the two goes first alternates from round to round, so a drift of the
host's other load falls on both sides alike. The flood runs in a process of its own: its requests never share an
interpreter with the websocket client whose frame arrival times are measured. A frame gap is the silence between
one frame of a run and the next, from its first event to its final frame (bench/load.py's `frame_gap_s_*`).

Run it against a stack on a quiet machine (`make run`, nothing else busy): on a shared box other tenants' load
makes both sides noisy. It prints JSON: both sides' frame-gap p50/p99/max and run lengths, the ratio of the p99s,
the flood's requests and their latency, the host's load average and its CPU model. Loopback targets only.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.load import LOOPBACK, connect, cpu_model, session_cookie  # noqa: E402
from bench.load_probes import pct  # noqa: E402

SEARCHES = ("kv cache", "prefill", "quantization", "attention", "batching", "paged attention", "roofline",
            "speculative decoding", "memory bandwidth", "flash attention", "token", "latency")
MODULE_LINK = re.compile(r'href="(/modules/[a-z0-9-]+/)"')


async def _get(reader, writer, host: str, path: str) -> int:
    """One GET on a keep-alive connection; the response read whole. Returns its status."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if length:
        await reader.readexactly(int(length[1]))
    elif re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status


async def _flood_client(i: int, host: str, port: int, paths: list[str], stop, stats: dict) -> None:
    reader = writer = None
    n = 0
    while not stop.is_set():
        path = paths[(i + n) % len(paths)]
        n += 1
        t0 = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            status = await asyncio.wait_for(_get(reader, writer, host, path), 30)
            stats["latency"].append(time.monotonic() - t0)
            stats["requests"] += 1
            stats["errors"] += status >= 400
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError):
            stats["errors"] += 1
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


def _flood_process(base: str, clients: int, paths: list[str], go, stop, out) -> None:
    """The flood's own process: idle until `go`, then `clients` loops until `stop`; sends its stats to `out`."""
    u = urllib.parse.urlparse(base)

    async def main():
        stats = {"requests": 0, "errors": 0, "latency": []}
        while True:
            go.wait()
            if stop.is_set():
                return
            t0 = time.monotonic()
            done = asyncio.Event()

            async def watch():
                while go.is_set() and not stop.is_set():
                    await asyncio.sleep(0.05)
                done.set()

            watcher = asyncio.create_task(watch())
            await asyncio.gather(*(_flood_client(i, u.hostname, u.port or 80, paths, done, stats)
                                   for i in range(clients)), watcher)
            out.send({"requests": stats["requests"], "errors": stats["errors"], "seconds": time.monotonic() - t0,
                      "latency": stats["latency"]})
            stats = {"requests": 0, "errors": 0, "latency": []}
            while go.is_set() and not stop.is_set():
                time.sleep(0.05)

    asyncio.run(main())


class Flood:
    def __init__(self, base: str, clients: int, paths: list[str]):
        self.go, self.stop = multiprocessing.Event(), multiprocessing.Event()
        self.parent, child = multiprocessing.Pipe()
        self.proc = multiprocessing.Process(target=_flood_process, daemon=True,
                                            args=(base, clients, paths, self.go, self.stop, child))
        self.proc.start()

    def start(self) -> None:
        self.go.set()

    def finish(self) -> dict:
        self.go.clear()
        if self.parent.poll(60):  # its clients stop within their 30 s request timeout
            return self.parent.recv()
        return {"requests": 0, "errors": 1, "seconds": 0.0, "latency": []}

    def close(self) -> None:
        self.stop.set()
        self.go.set()
        self.proc.join(10)


def flood_paths(base: str, limit: int) -> list[str]:
    """The course's lesson pages (from its index) and search queries, interleaved."""
    import urllib.request

    with urllib.request.urlopen(base.rstrip("/") + "/", timeout=30) as resp:
        lessons = list(dict.fromkeys(MODULE_LINK.findall(resp.read().decode())))[:limit]
    if not lessons:
        sys.exit("no lesson links on the course index: is the course loaded (manage.py loadcourse)?")
    queries = [f"/search/?q={urllib.parse.quote_plus(q)}" for q in SEARCHES]
    paths = []
    for i in range(max(len(lessons), len(queries))):
        paths += [lessons[i % len(lessons)], queries[i % len(queries)]]
    return paths


async def one_run(args, proto, inbox, ref: str) -> dict:
    """Start one live run on an open socket and time its frames until its final one."""
    prompt = f"Flood bench {args.nonce} {ref}: {args.prompt}"
    params = {"prompts": prompt, "max_new_tokens": args.max_new_tokens}
    if args.demo == "kv-cache":
        params = {"prompt": prompt, "max_new_tokens": args.max_new_tokens, "use_cache": True, "temperature": 0.0}
    t0 = time.time()
    proto.send_json({"action": "start", "demo": args.demo, "params": params, "ref": ref})
    gaps, last, streaming = [], None, False
    while True:
        try:
            at, frame = await asyncio.wait_for(inbox.get(), args.timeout)
        except asyncio.TimeoutError:  # a failed run, and the last: its late frames would mix with the next one's
            return {"status": "timeout", "gaps": gaps, "run_s": time.time() - t0}
        kind = frame.get("type")
        if streaming and last is not None:
            gaps.append(at - last)
        if kind == "event":
            streaming = True
        last = at
        if kind in ("done", "error", "_closed"):
            return {"status": frame.get("code", kind), "gaps": gaps, "run_s": time.time() - t0}


async def main_async(args) -> dict:
    paths = flood_paths(args.url, args.lessons)
    flood = Flood(args.url, args.flood_clients, paths)
    cookie = await asyncio.to_thread(session_cookie, args.url, None, True)
    proto, inbox = await connect(args.url, cookie)
    sides = {"alone": {"gaps": [], "p99": [], "run_s": [], "failed": 0},
             "flood": {"gaps": [], "p99": [], "run_s": [], "failed": 0, "requests": 0, "errors": 0,
                       "seconds": 0.0, "latency": []}}
    load_before = os.getloadavg()
    try:
        await one_run(args, proto, inbox, "warm-up")  # the worker's first run of this demo pays its set-up
        for r in range(args.rounds):
            if sides["alone"]["failed"] + sides["flood"]["failed"] and not args.keep_going:
                break
            order = ("alone", "flood") if r % 2 == 0 else ("flood", "alone")
            for side in order:
                if side == "flood":
                    flood.start()
                    await asyncio.sleep(args.ramp)  # the flood at full speed before the run starts
                result = await one_run(args, proto, inbox, f"{r}-{side}")
                if side == "flood":
                    stats = flood.finish()
                    for k in ("requests", "errors", "seconds"):
                        sides[side][k] += stats[k]
                    sides[side]["latency"] += stats["latency"]
                s = sides[side]
                if result["status"] != "done":
                    s["failed"] += 1
                    if result["status"] == "timeout":
                        break
                    continue
                s["gaps"] += result["gaps"]
                s["p99"].append(round(pct(result["gaps"], 99), 3))
                s["run_s"].append(round(result["run_s"], 2))
    finally:
        proto.sendClose()
        flood.close()
    report = {"demo": args.demo, "max_new_tokens": args.max_new_tokens, "rounds": args.rounds,
              "flood_clients": args.flood_clients, "flood_paths": len(paths)}
    for side, s in sides.items():
        report[side] = {"frame_gap_s_p50": round(pct(s["gaps"], 50), 4), "frame_gap_s_p99": round(pct(s["gaps"], 99), 4),
                        "frame_gap_s_max": round(max(s["gaps"]), 4) if s["gaps"] else None,
                        "frame_gaps": len(s["gaps"]), "p99_each_round": s["p99"], "run_s_each_round": s["run_s"],
                        "runs_failed": s["failed"]}
    f = sides["flood"]
    report["flood"].update({"requests": f["requests"], "errors": f["errors"],
                            "requests_per_s": round(f["requests"] / f["seconds"], 1) if f["seconds"] else None,
                            "request_ms_p50": round(pct(f["latency"], 50) * 1000, 1),
                            "request_ms_p99": round(pct(f["latency"], 99) * 1000, 1)})
    alone, flooded = report["alone"]["frame_gap_s_p99"], report["flood"]["frame_gap_s_p99"]
    report["p99_ratio_flood_over_alone"] = round(flooded / alone, 2) if alone and alone == alone else None
    report["goal_p99_ratio_at_most"] = 2.0
    report["cpu"] = f"{cpu_model()}, {os.cpu_count()} logical CPUs"
    report["load_average_before_after"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of one run alone and one under the flood")
    ap.add_argument("--flood-clients", type=int, default=20)
    ap.add_argument("--lessons", type=int, default=20, help="at most this many lesson pages in the flood's loop")
    ap.add_argument("--demo", default="paged-attention", choices=("paged-attention", "kv-cache"),
                    help="paged-attention: one prompt, a frame each decode step, no comparison at the end")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--ramp", type=float, default=1.0, help="seconds of flood before its run starts")
    ap.add_argument("--timeout", type=float, default=120,
                    help="longest silence waited for from a run (s); past it the benchmark stops and reports")
    ap.add_argument("--keep-going", action="store_true", help="more rounds after a run that ended in an error")
    args = ap.parse_args()
    args.nonce = os.urandom(3).hex()  # nothing replayed from an earlier benchmark's runs
    if not (urllib.parse.urlparse(args.url).hostname or "").startswith(LOOPBACK):
        sys.exit("bench/flood.py only targets a stack on this machine (loopback addresses)")
    report = asyncio.run(main_async(args))
    print(json.dumps(report, indent=2))
    failed = report["alone"]["runs_failed"] + report["flood"]["runs_failed"]
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
