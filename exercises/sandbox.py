"""Run a student's code and the test harness (exercises/harness.py) in a sandbox, and read back what it returned.

One run is `prlimit … -- bwrap … -- python -I -S -B -c <harness>`:
  * prlimit sets the hard rlimits (CPU seconds, address space, file size, open files, no core dumps) before bwrap
    starts, without a preexec_fn: the Celery worker that calls this has threads, and code run between fork and
    exec in a threaded process can deadlock. RLIMIT_NPROC is set by the harness inside the namespace, before the
    student's code exists: outside, it would count every process of the worker's uid (and root ignores it).
  * bwrap unshares every namespace (no network, own PIDs, own IPC, no uid of the host: 65534), drops every
    capability, forbids new user namespaces, and loads the seccomp filter (exercises/seccomp.py: no fork, clone,
    sockets, mounts or ptrace). The filesystem is the system /usr (+ the /lib, /bin links), the interpreter's
    binary, libpython and stdlib (site-packages hidden) read-only, a private 16 MB /tmp, its own /proc and /dev;
    no /etc (beyond ld.so.cache), no /home, no /root, no project, no database, no keys, no media.
  * the worker kills the whole process group at the wall-clock limit or when the output passes its cap.
Without bwrap or prlimit nothing runs (SandboxUnavailable): there is no unsandboxed fallback.

Pure Python only: numpy and torch are not mounted. The exercises use lists and floats, which keeps a run's start
at ~50 ms instead of the ~1 s a torch import would add.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import seccomp

HARNESS_SOURCE = (Path(__file__).resolve().parent / "harness.py").read_text()
PROJECT_ROOT = Path(__file__).resolve().parent.parent
SANDBOX_UID = 65534  # "nobody" inside the namespace


class SandboxUnavailable(RuntimeError):
    """This machine cannot sandbox: the run is refused, never done without one."""

    run_error_code = "sandbox_unavailable"  # a live run's error (workers.tasks), with this message


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 3
    wall_seconds: float = 6.0
    memory_bytes: int = 256 * 2**20
    processes: int = 16  # RLIMIT_NPROC inside (seccomp already refuses fork and clone)
    file_bytes: int = 1 * 2**20
    open_files: int = 64
    output_bytes: int = 256 * 2**10  # everything the sandbox writes on stdout, harness records included
    tmp_bytes: int = 16 * 2**20  # the private /tmp


@dataclass
class RawRun:
    """What one sandboxed process reported: harness records, the student's output, and how it ended."""
    records: list[dict] = field(default_factory=list)
    output: str = ""  # the student's prints (and anything written on fd 1/2), capped
    output_dropped: int = 0  # characters of output dropped by the caps
    returncode: int | None = None
    timed_out: bool = False
    overflow: bool = False  # killed for writing more than Limits.output_bytes
    wall_s: float = 0.0

    @property
    def done(self) -> bool:
        return any(r.get("done") for r in self.records)


def _tool(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/bin/{name}", f"/bin/{name}") if os.path.exists(p)), None)
    if not found:
        package = {"bwrap": "bubblewrap", "prlimit": "util-linux"}[name]
        raise SandboxUnavailable(
            f"The exercise sandbox needs `{name}` ({package}), which is not installed on this worker: "
            f"`make chromium` installs it (apt-get install {package}). Code is never run without the sandbox.")
    return found


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.lru_cache(maxsize=1)
def runtime_mounts() -> tuple[str, tuple[str, ...]]:
    """The interpreter the sandbox runs (the worker's own, without its virtualenv) and the bwrap arguments that
    mount the system runtime and that interpreter read-only."""
    exe = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    stdlib = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["stdlib"]
    for path in (exe, stdlib):
        if _inside(path, str(PROJECT_ROOT)) or _inside(str(PROJECT_ROOT), path):
            raise SandboxUnavailable(f"the interpreter ({path}) lies inside the project: mounting it would show "
                                     "the project to the sandbox")
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    extra = [exe, stdlib]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        extra += sorted(glob.glob(os.path.join(libdir, "libpython*.so*")))
    for path in extra:
        if not _inside(path, "/usr"):
            args += ["--ro-bind", path, path]
    site = os.path.join(stdlib, "site-packages")
    if os.path.isdir(site):  # never on sys.path (-S), and hidden too: the worker's packages are not the student's
        args += ["--tmpfs", site]
    return exe, tuple(args)


def command(limits: Limits, seccomp_fd: int, source: str = HARNESS_SOURCE) -> list[str]:
    """The whole command line: `source` (a harness) run by the sandbox's interpreter, inside bwrap, under prlimit."""
    exe, mounts = runtime_mounts()
    cpu = limits.cpu_seconds
    return [
        _tool("prlimit"), f"--cpu={cpu}:{cpu + 1}", f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}", "--core=0", "--",
        _tool("bwrap"), "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
        "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
        "--seccomp", str(seccomp_fd), *mounts,
        "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
        "--chdir", "/tmp", "--clearenv", "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PATH", "/usr/bin:/bin", "--",
        exe, "-I", "-S", "-B", "-c", source,
    ]


def memfd(name: str, data: bytes) -> int:
    # Close-on-exec: a process another worker thread starts meanwhile must not inherit a payload (hidden inputs);
    # Popen hands this one to our child alone (as its stdin, or through pass_fds).
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@dataclass
class _Live:
    proc: subprocess.Popen
    nonce: str
    started: float
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    result: RawRun = field(default_factory=RawRun)


def kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # prlimit→bwrap leads the group; its children die with it
    except ProcessLookupError:
        pass


def _start(code: str, cases: list[dict], limits: Limits) -> _Live:
    nonce = secrets.token_hex(8)
    payload = json.dumps({"code": code, "cases": cases, "nonce": nonce,
                          "rlimits": {"RLIMIT_NPROC": limits.processes}}, allow_nan=True).encode()
    filter_fd = memfd("ilab-seccomp", seccomp.program())
    stdin_fd = memfd("ilab-payload", payload)
    try:
        proc = subprocess.Popen(command(limits, filter_fd), stdin=stdin_fd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=(filter_fd,), start_new_session=True,
                                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, close_fds=True)
    finally:
        os.close(filter_fd)
        os.close(stdin_fd)
    return _Live(proc, nonce, time.monotonic())


def _finish(live: _Live, display_bytes: int) -> RawRun:
    data = b"".join(live.chunks)
    pattern = re.compile(rb"\n\x1e" + live.nonce.encode() + rb" ([^\n]*)\n")
    result = live.result
    for match in pattern.finditer(data):
        try:
            record = json.loads(match.group(1))
        except ValueError:
            continue  # a line the student's code wrote over ours: the grading treats the case as unreported
        if isinstance(record, dict):
            result.records.append(record)
    output = pattern.sub(b"", data)
    dropped = sum(int(r.get("dropped") or 0) for r in result.records if r.get("done"))
    result.output = output[:display_bytes].decode("utf-8", "replace")
    result.output_dropped = dropped + max(0, len(output) - display_bytes)
    result.returncode = live.proc.returncode
    result.wall_s = time.monotonic() - live.started
    return result


def run_many(jobs: list[tuple[str, list[dict]]], limits: Limits | None = None,
             display_bytes: int = 8_000) -> list[RawRun]:
    """Run each (code, cases) job in its own sandbox, all at once; their RawRuns in the same order."""
    limits = limits or Limits()
    lives = [_start(code, cases, limits) for code, cases in jobs]
    selector = selectors.DefaultSelector()
    for live in lives:
        selector.register(live.proc.stdout, selectors.EVENT_READ, live)
    deadline = time.monotonic() + limits.wall_seconds
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                for key in list(selector.get_map().values()):
                    key.data.result.timed_out = True
                    kill(key.data.proc)
                    selector.unregister(key.fileobj)
                break
            for key, _ in selector.select(timeout=remaining):
                live: _Live = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                live.chunks.append(chunk)
                live.size += len(chunk)
                if live.size > limits.output_bytes:
                    live.result.overflow = True
                    kill(live.proc)
                    selector.unregister(key.fileobj)
    finally:
        selector.close()
        for live in lives:
            if live.result.timed_out or live.result.overflow:
                kill(live.proc)
            try:  # its output ended (closed or capped): the process still gets only the wall time left
                live.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                live.result.timed_out = True
                kill(live.proc)
                live.proc.wait()
            live.proc.stdout.close()
    return [_finish(live, display_bytes) for live in lives]


def run(code: str, cases: list[dict], limits: Limits | None = None) -> RawRun:
    return run_many([(code, cases)], limits)[0]


def started(run: RawRun) -> None:
    """Raise SandboxUnavailable when the harness never started (its first record comes before any student code):
    bwrap refused (no user namespaces in this container, say) or the interpreter could not run."""
    if not run.records and not run.timed_out and not run.overflow:
        raise SandboxUnavailable(f"the sandbox did not start (exit status {run.returncode}): {run.output[:300]}")


_checked = False


def check_available() -> None:
    """Raise SandboxUnavailable unless a trivial run works here (the tools, the seccomp table, namespaces)."""
    global _checked
    if not _checked:
        started(run("", []))
        _checked = True
