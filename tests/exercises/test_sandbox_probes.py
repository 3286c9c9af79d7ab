"""Hostile submissions against the real sandbox: each is contained with a message that says what happened, leaves
nothing running, and a right answer submitted next still passes (the worker keeps serving other students)."""
from __future__ import annotations

import json
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from exercises import catalog, seccomp
from exercises.grading import SANDBOX_RULES
from exercises.runner import evaluate
from exercises.sandbox import Limits
from inferencelab.secret_key import KEY_FILE

pytestmark = pytest.mark.usefixtures("sandbox_ready")

KV = catalog.get("kv-cache-bytes")
SIGNATURE = "def kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_value=2):\n"


def attack(body: str, prelude: str = "", limits: Limits | None = None) -> dict:
    """Grade a kv_cache_bytes whose body is `body` (after `prelude` at module level)."""
    code = textwrap.dedent(prelude) + SIGNATURE + textwrap.indent(textwrap.dedent(body), "    ")
    return evaluate(KV, code, limits) if limits else evaluate(KV, code)


def messages(result: dict) -> list[str]:
    return [t["message"] for t in result["tests"] if not t["hidden"]]


@pytest.fixture(autouse=True)
def still_serving():
    """After every probe: no process left behind, and the reference solution still passes every test."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def left() -> set[int]:
        return {p.pid for p in psutil.Process().children(recursive=True)} - before

    yield
    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == set()
    result = evaluate(KV, KV.reference)
    assert result["passed"], result


def test_fork_bomb_gets_eperm_at_its_first_fork():
    result = attack("""
        import os
        while True:
            os.fork()
    """)
    assert not result["passed"]
    assert all("PermissionError" in m and SANDBOX_RULES in m for m in messages(result)), messages(result)
    spawned = attack("""
        import subprocess
        return subprocess.run(["/usr/bin/true"]).returncode
    """)
    assert all("PermissionError" in m for m in messages(spawned)), messages(spawned)
    threads = attack("""
        import threading
        threading.Thread(target=print).start()
    """)
    assert all("can't start new thread" in m for m in messages(threads)), messages(threads)


def test_endless_loop_is_stopped_by_the_cpu_limit():
    t0 = time.monotonic()
    result = attack("while True:\n    pass\n", limits=Limits(cpu_seconds=1, wall_seconds=5))
    assert time.monotonic() - t0 < 7
    first = messages(result)[0]
    assert "CPU time" in first or "Stopped after" in first, first
    assert "endless loop" in first
    assert all(m.startswith("Not run") for m in messages(result)[1:]), messages(result)
    assert result["problem"] == first


def test_sleeping_forever_is_stopped_by_the_wall_clock():
    t0 = time.monotonic()
    result = attack("import time\ntime.sleep(3600)\n", limits=Limits(wall_seconds=1.5))
    assert time.monotonic() - t0 < 4
    assert messages(result)[0] == "Stopped after 1.5 s: your code was still running (an endless loop?)."


def test_ten_gigabyte_allocation_is_a_memory_error():
    result = attack("return len(bytearray(10 * 2**30))")
    assert all("MemoryError" in m and "256 MB" in m for m in messages(result)), messages(result)


def test_etc_passwd_is_not_there():
    result = attack("return open('/etc/passwd').read()")
    assert all("FileNotFoundError" in m and "/etc/passwd" in m for m in messages(result)), messages(result)
    assert "root:x:0" not in json.dumps(result)


def test_project_secret_key_database_and_environment_are_out_of_reach():
    assert KEY_FILE.exists(), "the project's key file (make test creates it)"
    secret = KEY_FILE.read_text().strip()
    key_path = str(KEY_FILE)
    result = attack(f"return open({key_path!r}).read()")
    assert all("FileNotFoundError" in m for m in messages(result)), messages(result)
    looked = attack(f"""
        import os
        seen = {{}}
        for path in ({str(KEY_FILE.parent.parent)!r}, {str(Path.home())!r}, "/etc", "/proc/1/environ"):
            try:
                seen[path] = os.listdir(path) if os.path.isdir(path) else open(path).read()
            except OSError as exc:
                seen[path] = type(exc).__name__
        seen["env"] = sorted(os.environ)
        return seen
    """)
    got = looked["tests"][0]["got"]
    assert secret not in json.dumps(looked)
    assert f"{str(KEY_FILE.parent.parent)!r}: 'FileNotFoundError'" in got, got
    assert "'/etc': ['ld.so.cache']" in got, got  # nothing but the linker's cache
    assert "'env': ['HOME', 'LANG', 'PATH', 'PWD']" in got, got  # no DJANGO_*, REDIS_URL or DATABASE_URL
    assert not any(name in got for name in ("DJANGO", "REDIS", "DATABASE", "SECRET"))  # /proc/1 included


def test_sockets_are_refused():
    result = attack("""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(("1.1.1.1", 80))
    """)
    assert all("PermissionError" in m for m in messages(result)), messages(result)
    unix = attack("import socket\nsocket.socket(socket.AF_UNIX)\n")
    assert all("PermissionError" in m for m in messages(unix)), messages(unix)


def test_writes_outside_the_private_tmp_fail(tmp_path_factory):
    marker = tmp_path_factory.getbasetemp() / "host-marker"
    marker.write_text("host")
    result = attack("open('/usr/lib/evil.py', 'w').write('x')")
    assert all("Read-only file system" in m for m in messages(result)), messages(result)
    root = attack("open('/evil', 'w').write('x')")
    assert all("Read-only file system" in m for m in messages(root)), messages(root)
    private = attack("""
        import os
        with open('/tmp/scratch.txt', 'w') as f:
            f.write('mine')
        return [open('/tmp/scratch.txt').read(), os.listdir('/tmp')]
    """)
    assert private["tests"][0]["got"] == "['mine', ['scratch.txt']]"  # its own /tmp: not the host's
    big = attack("open('/tmp/big', 'wb').write(b'x' * (5 * 2**20))")
    assert all("File too large" in m for m in messages(big)), messages(big)
    assert not Path("/usr/lib/evil.py").exists() and not Path("/evil").exists()


def test_ctypes_system_calls_meet_the_seccomp_filter():
    numbers = seccomp.denied_numbers()
    calls = {name: numbers[name] for name in ("clone", "socket", "unshare", "mount", "ptrace")}
    result = attack(f"""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        out = {{}}
        for name, number in {calls!r}.items():
            out[name] = [libc.syscall(number, 0, 0, 0, 0, 0), os.strerror(ctypes.get_errno())]
        out["setuid0"] = libc.setuid(0)
        return out
    """)
    got = result["tests"][0]["got"]
    for name in calls:
        assert f"'{name}': [-1, 'Operation not permitted']" in got, got
    assert "'setuid0': -1" in got
    crash = attack("import ctypes\nreturn ctypes.string_at(0)\n")
    assert messages(crash)[0] == "Your code crashed the Python process (SIGSEGV).", messages(crash)


def test_a_hundred_megabytes_of_output_are_cut():
    printed = attack("print('x' * 100_000_000)\n" + textwrap.dedent(KV.reference.split(":\n", 1)[1]))
    assert printed["passed"]  # print() output is dropped inside the sandbox: the tests still run
    assert printed["output_dropped"] >= 99_000_000 and len(printed["output"]) <= 8_000
    written = attack("import os\nos.write(1, b'x' * 100_000_000)\n")
    assert messages(written)[0] == "Stopped: your code wrote more than 256 KB of output.", messages(written)
    assert len(json.dumps(written)) < 100_000


def test_exiting_the_process_is_reported():
    result = attack("import os\nos._exit(3)\n")
    assert messages(result)[0] == "Your code ended the process (exit status 3)."
    loading = evaluate(KV, "raise SystemExit(0)\n")
    assert loading["problem"].startswith("Your code does not load: SystemExit")
    syntax = evaluate(KV, "def kv_cache_bytes(:\n")
    assert "SyntaxError (line 1)" in syntax["problem"]


def test_a_right_answer_is_served_while_an_endless_loop_runs():
    """The `cpu` worker runs two submissions at once (-c 2): one stuck in a loop does not hold up the other."""
    slow: dict = {}
    stuck = threading.Thread(target=lambda: slow.update(attack("while True:\n    pass\n")))
    stuck.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    result = evaluate(KV, KV.reference)
    took = time.monotonic() - t0
    assert result["passed"] and stuck.is_alive() and took < 2.5, (took, result)
    stuck.join()
    assert "endless loop" in slow["problem"]
