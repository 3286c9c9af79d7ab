"""`make run`'s supervisor (scripts/run_stack.py): everything starts, Ctrl-C stops all of it, a re-run works.

The real processes (redis-server, two Celery workers, Daphne) on free ports against a throw-away SQLite
database with no course loaded, so start-up queues no narration.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_and_interrupt(env: dict) -> tuple[set[int], str]:
    """Start the supervisor, wait until it says the stack is up and a page answers, press Ctrl-C.

    Returns the pids that ran under it (every process in its children's process groups) and its output.
    """
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_stack.py")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while not any("Inference Lab is up" in line for line in lines):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(lines[-40:])
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines[-40:])
        with urllib.request.urlopen(f"http://127.0.0.1:{env['PORT']}/demos/", timeout=30) as resp:
            assert resp.status == 200
        children = psutil.Process(proc.pid).children(recursive=True)
        # Each service runs in a process group of its own; the supervisor's group is this test's too.
        groups = {_pgid(c.pid) for c in children} - {None, os.getpgid(proc.pid)}
        pids = {p.pid for p in psutil.process_iter() if p.is_running() and _pgid(p.pid) in groups}
        names = {psutil.Process(pid).name() for pid in pids}
        assert any("redis" in n for n in names) and len(groups) == 4, (names, groups)  # redis, gpu, cpu, daphne
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        lines.append(out)
    finally:
        if proc.poll() is None:  # a failed assertion above: stop the stack the way a user would
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return pids, "".join(lines)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_make_run_starts_everything_and_ctrl_c_leaves_no_process_behind(tmp_path):
    env = dict(os.environ)
    env.update({"PORT": str(free_port()), "REDIS_PORT": str(free_port()), "HOST": "127.0.0.1",
                "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "CELERY_CONCURRENCY": "1",
                "CELERY_CPU_CONCURRENCY": "1"})
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    for attempt in range(2):  # the second start proves the first freed its ports and left nothing running
        pids, output = start_and_interrupt(env)
        assert "all stopped" in output, output[-3000:]
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not alive, (attempt, alive, output[-3000:])
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", int(env["PORT"]))) != 0


def test_redis_url_defaults_to_this_installs_password_and_an_explicit_url_wins(tmp_path):
    from inferencelab.redis_auth import local_url

    password_file = tmp_path / "redis_password"
    assert local_url(6390, password_file) == "redis://127.0.0.1:6390/0"  # none yet: a Redis without one
    subprocess.run([sys.executable, "-m", "inferencelab.redis_auth", str(password_file)], cwd=ROOT, check=True)
    password = password_file.read_text().strip()
    assert len(password) >= 40 and oct(password_file.stat().st_mode & 0o777) == "0o600"
    assert local_url(6390, password_file) == f"redis://:{password}@127.0.0.1:6390/0"

    def settings_url(**env) -> str:
        code = "from django.conf import settings; print(settings.REDIS_URL, settings.CELERY_BROKER_URL, " \
               "settings.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0])"
        full = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_PORT")}
        full.update(env, DJANGO_SETTINGS_MODULE="inferencelab.settings")
        out = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=ROOT, env=full,
                             check=True, capture_output=True, text=True).stdout.split()
        assert len(set(out)) == 1, out  # the broker and the Channels layer use the same URL
        return out[0]

    assert settings_url(REDIS_PORT="6391") == local_url(6391)  # this checkout's own var/redis_password, if any
    assert settings_url(REDIS_URL="redis://elsewhere:6379/2") == "redis://elsewhere:6379/2"


def test_make_run_builds_the_native_kernels_before_it_starts_the_stack():
    """A worker that compiled the kernels at its first run kept the first runs queued for minutes."""
    out = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    commands = [line.strip() for line in out.splitlines()]
    build = next(i for i, c in enumerate(commands) if c.endswith("-m inference_core.kernels.quant_kernels"))
    start = next(i for i, c in enumerate(commands) if c.endswith("scripts/run_stack.py"))
    assert build < start, commands
