"""`make run` for tests (tests/demos/test_demos_supervisor.py): scripts/run_stack.py started as `make run` starts it
(its Redis, two Celery workers, Daphne), its output collected and its children found by command line; a page
fetched every quarter second throughout; starting a run on a socket; giving up on a worker."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import redis
from asgiref.sync import sync_to_async
from test_demos_scaleout import WS

ROOT = Path(__file__).resolve().parents[2]
# No cache: every step re-reads the whole sequence, so the run lasts long enough to interrupt.
LONG = {"max_new_tokens": 64, "use_cache": False, "temperature": 0.0}


def first_token(frame: dict) -> bool:
    return frame["type"] == "event" and frame["event"]["type"] == "token"


class MakeRun:
    """`scripts/run_stack.py` as `make run` starts it, its output collected by a thread."""

    def __init__(self, env: dict):
        self.env = env
        self.port = int(env["PORT"])
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_stack.py")], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str | tuple[str, ...], timeout: float, after: int = 0) -> int:
        """The index of the first output line from `after` on that contains `text` (or one of several)."""
        texts = (text,) if isinstance(text, str) else text
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(self.lines[after:], start=after):
                if any(t in line for t in texts):
                    return i
            assert self.proc.poll() is None, self.output()[-4000:]
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} within {timeout}s:\n{self.output()[-4000:]}")

    def child(self, marker: str) -> psutil.Process:
        """The supervised process whose command line contains `marker` (its group leader)."""
        for proc in psutil.Process(self.proc.pid).children():
            if marker in " ".join(proc.cmdline()):
                return proc
        raise AssertionError(f"no child {marker!r}")

    def redis(self) -> redis.Redis:
        password = (ROOT / "var" / "redis_password").read_text().strip()
        return redis.Redis(port=int(self.env["REDIS_PORT"]), password=password, socket_timeout=2)

    def wait_worker_ready(self, timeout: float) -> None:
        """The `gpu` worker published stats saying it is warm (workers.startup.warm_up)."""
        pid = self.child("-Q gpu").pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                for key in self.redis().scan_iter(match="demos:worker:*"):
                    raw = self.redis().get(key)
                    if raw and json.loads(raw).get("pid") == pid and json.loads(raw).get("ready"):
                        return
            except redis.exceptions.RedisError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"gpu worker not ready in {timeout}s:\n{self.output()[-4000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


class PagePoller:
    """GET a page every quarter second from a thread; every answer that was not a 200 is kept."""

    def __init__(self, url: str):
        self.url, self.failures, self.count = url, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(0.25):
            try:
                with urllib.request.urlopen(self.url, timeout=10) as resp:
                    status = resp.status
            except Exception as exc:  # noqa: BLE001 - a refused connection or a 5xx is what this records
                status = repr(exc)
            self.count += 1
            if status != 200:
                self.failures.append((time.strftime("%H:%M:%S"), status))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=15)


def run_status(db: Path, run_id: str) -> tuple[str, str]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, error_code FROM demos_run WHERE id = ?",
                            (uuid.UUID(run_id).hex,)).fetchone()


async def start_on(ws: WS, prompt: str, **params) -> str:
    await ws.send({"action": "start", "demo": "kv-cache", "params": {"prompt": prompt, **params}})
    while (frame := await ws.recv(30))["type"] != "accepted":
        assert frame["type"] not in ("error",), frame
    return frame["run_id"]


async def given_up_on(stack: MakeRun, name: str) -> None:
    """SIGKILL the supervised worker `name` (`-Q name`) as often as it takes the supervisor to give up on it."""
    for _ in range(4):  # earlier deaths within the minute count towards the cap too
        mark = len(stack.lines)
        stack.child(f"-Q {name}").kill()
        found = await sync_to_async(stack.wait_for_line)((f"GIVING UP on {name}", f"restarted {name}"), 30, mark)
        if "GIVING UP" in stack.lines[found]:
            return
    raise AssertionError(f"the supervisor never gave up on {name}, which kept dying")


def pings(stack: MakeRun) -> bool:
    try:
        return stack.redis().ping()
    except redis.exceptions.RedisError:
        return False
