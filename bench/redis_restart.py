"""Redis SIGKILLed under `make run` with a long demo run in flight, again and again (issues 38 and 43): how long until
a new short run is done, whether the `gpu` worker survived it, and how long the stack then takes to stop.

    python bench/redis_restart.py [--kills 5] [--long-repeat 10] [--json out.json]

The stack is scripts/run_stack.py as `make run` starts it (a fresh database), with a Redis of its own on a free port
that this script kills (SIGKILL) and starts again a second later, as the supervisor does (its first backoff), from
its append-only file. Per kill: seconds from the kill to the short run's `done` (goal: ≤ 20 s), whether the worker
process is the same one (goal: no exit), how the run in flight ended. At the end: seconds from SIGINT to the stack's
exit (goal: ≤ 10 s, no child killed). Not CI: the figures depend on the machine and on whatever else it runs.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "demos"), str(ROOT / "tests")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

import psutil  # noqa: E402
import redis  # noqa: E402
from demo_stack import Stack, free_port  # noqa: E402
from test_demos_scaleout import WS  # noqa: E402


class Supervised:
    """scripts/run_stack.py with REDIS_URL set (so it leaves Redis to us), its output kept with arrival times."""

    def __init__(self, env: dict, log: Path):
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_stack.py")], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = open(log, "w")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))
            self.log.write(line)
            self.log.flush()

    def said(self, text: str, since: float = 0.0) -> bool:
        return any(text in line for t, line in self.lines if t >= since)

    def gpu(self) -> psutil.Process | None:
        for child in psutil.Process(self.proc.pid).children():
            if "-Q gpu" in " ".join(child.cmdline()):
                return child
        return None


def wait_ready(redis_url: str, pid: int, timeout: float = 600) -> None:
    r = redis.Redis.from_url(redis_url, socket_timeout=2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for key in r.scan_iter(match="demos:worker:*"):
                stats = json.loads(r.get(key) or "{}")
                if stats.get("pid") == pid and stats.get("ready"):
                    return
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the gpu worker was not ready within {timeout:.0f} s")


async def start(ws: WS, prompt: str, **params) -> str:
    await ws.send({"action": "start", "demo": "kv-cache", "params": {"prompt": prompt, **params}})
    while (frame := await ws.recv(60))["type"] != "accepted":
        if frame["type"] == "error":
            raise RuntimeError(frame)
    return frame["run_id"]


async def final(ws: WS, timeout: float, stop=lambda frame: frame["type"] in ("done", "error")) -> dict:
    deadline = time.monotonic() + timeout
    while not stop(frame := await ws.recv(max(0.1, deadline - time.monotonic()))):
        pass
    return frame


async def kill_once(stack: Stack, sup: Supervised, port: int, long_repeat: int) -> dict:
    gpu = sup.gpu().pid
    flight, other = await WS.connect(port), await WS.connect(port)
    try:
        run_id = await start(flight, f"Long ({uuid.uuid4().hex[:6]}): " + "The waves roll in. " * long_repeat,
                    max_new_tokens=128, use_cache=False, temperature=0.0)
        await final(flight, 120, lambda f: f["type"] == "event" and f["event"]["type"] == "token")
        in_flight = asyncio.ensure_future(final(flight, 600))
        stack.kill("redis")
        killed = time.monotonic()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(stack.start_redis)
        result = {"redis_back_s": round(time.monotonic() - killed, 1)}
        try:
            await start(other, f"After Redis ({uuid.uuid4().hex[:6]}): red, green,", max_new_tokens=4)
            frame = await final(other, 120)
            result.update(new_run=frame.get("status") or frame.get("code"),
                          new_run_done_s=round(time.monotonic() - killed, 1))
        except (TimeoutError, asyncio.TimeoutError, ConnectionError, RuntimeError) as exc:
            result.update(new_run=repr(exc), new_run_done_s=None)
        frame = await in_flight
        await asyncio.sleep(1)  # its ack
        now = sup.gpu()
        # Still unacknowledged once it ended, its ticket would be delivered again after the visibility timeout.
        result["ticket_acked"] = not any(run_id.encode() in raw for raw in redis.Redis.from_url(stack.redis_url).hvals(
            "unacked"))
        result.update(in_flight=frame.get("status") or frame.get("code"),
                      in_flight_end_s=round(time.monotonic() - killed, 1),
                      worker_same=bool(now and now.pid == gpu), worker_exited=sup.said("gpu exited", killed))
        if now and now.pid != gpu:
            await asyncio.to_thread(wait_ready, stack.redis_url, now.pid)
        return result
    finally:
        await flight.close()
        await other.close()


async def main(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="redis-restart-"))
    stack = Stack(work, str(work / "db.sqlite3"))
    stack.start_redis()
    env = {**stack.env, "PORT": str(free_port()), "HOST": "127.0.0.1", "CELERY_CONCURRENCY": str(args.concurrency),
           "CELERY_CPU_CONCURRENCY": "1"}
    for test_only in ("DEMO_HEARTBEAT_INTERVAL", "DEMO_HEARTBEAT_TTL"):  # make run's own defaults
        env.pop(test_only, None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    sup = Supervised(env, work / "stack.log")
    figures: dict = {"cpu": cpu_model(), "log": str(work / "stack.log"), "kills": []}
    try:
        while not sup.said("Inference Lab is up"):
            if sup.proc.poll() is not None:
                raise SystemExit("".join(line for _, line in sup.lines)[-3000:])
            await asyncio.sleep(0.2)
        await asyncio.to_thread(wait_ready, stack.redis_url, sup.gpu().pid)
        for n in range(args.kills):
            figures["kills"].append(await kill_once(stack, sup, int(env["PORT"]), args.long_repeat))
            print(n + 1, figures["kills"][-1], flush=True)
    finally:
        stopping = time.monotonic()
        sup.proc.send_signal(signal.SIGINT)
        try:
            sup.proc.wait(60)
        except subprocess.TimeoutExpired:
            sup.proc.kill()
        figures["stop_s"] = round(time.monotonic() - stopping, 1)
        figures["stop_killed"] = [line.strip() for t, line in sup.lines if t >= stopping and "did not stop" in line]
        stack.stop()
    return figures


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--long-repeat", type=int, default=10, help="prompt sentences of the run in flight")
    parser.add_argument("--concurrency", type=int, default=2, help="threads of the gpu worker (make run: 16)")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    result = asyncio.run(main(options))
    print(json.dumps({k: v for k, v in result.items() if k != "kills"}, indent=1))
    if options.json:
        options.json.write_text(json.dumps(result, indent=1))
