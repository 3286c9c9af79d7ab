"""One long-lived sandbox for a live run: the student's function, loaded once, asked for each generated token.

The process is the same sandbox as "Run tests" (exercises/sandbox.py: prlimit, bwrap, seccomp, no network, no
project, a private /tmp), running exercises/live_harness.py: the worker writes one JSON line per step on its stdin
and reads the answer's record from its stdout. Every way the student's code can go wrong ends the run with a
`StudentCodeFailed` whose message says what happened and at which step: an answer slower than the per-step limit,
an exception, a value that is not a candidate's index, output past the cap, the whole run's CPU or wall time, or a
process that died. The sandbox is killed then, and whenever the run ends (`close`), so nothing outlives the run.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import selectors
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import seccomp
from .grading import SANDBOX_RULES
from .sandbox import Limits, command, kill, memfd

LIVE_HARNESS_SOURCE = (Path(__file__).resolve().parent / "live_harness.py").read_text()


@dataclass(frozen=True)
class LiveLimits:
    step_seconds: float = 1.0  # one answer; a sampler over 64 numbers needs well under a millisecond
    start_seconds: float = 10.0  # the sandbox's start and the code's load (a loaded box starts Python slowly)
    # The whole run's CPU seconds, memory, processes, output; its wall time is bounded by tokens × step_seconds.
    sandbox: Limits = Limits(cpu_seconds=20)


class StudentCodeFailed(RuntimeError):
    """The student's code ended the run; the message is for the student. `workers.tasks` reports it as the run's
    error under `run_error_code`, with this message alone."""

    run_error_code = "student_code_failed"


class LiveSession:
    """The sandboxed process of one run. Not thread-safe: one run's thread asks it."""

    def __init__(self, code: str, fn: str, limits: LiveLimits = LiveLimits()) -> None:
        self.limits, self.fn = limits, fn
        self.nonce = secrets.token_hex(8)
        self.pattern = re.compile(rb"\n\x1e" + self.nonce.encode() + rb" ([^\n]*)\n")
        self.buffer, self.received, self.output = b"", 0, b""
        self.started = time.monotonic()
        filter_fd = memfd("ilab-seccomp", seccomp.program())
        try:
            self.proc = subprocess.Popen(
                command(limits.sandbox, filter_fd, LIVE_HARNESS_SOURCE), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(filter_fd,), start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, close_fds=True)
        finally:
            os.close(filter_fd)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        setup = {"code": code, "fn": fn, "nonce": self.nonce,
                 "rlimits": {"RLIMIT_NPROC": limits.sandbox.processes}}
        self._send(setup, "starting")
        ready = self._record(limits.start_seconds, "starting")
        if not ready.get("ready"):
            raise StudentCodeFailed("The sandbox did not start.")
        loaded = self._record(limits.start_seconds, "loading")
        if "load_error" in loaded:
            raise StudentCodeFailed(self._raised(loaded["load_error"], "loading your code"))

    def ask(self, args: list, where: str) -> object:
        """What the function returned for `args` (an int, a list of ints, or {"type", "repr"}); `where` names the
        call in messages ("at token 3")."""
        self._send({"args": args}, where)
        record = self._record(self.limits.step_seconds, where, answer=True)
        if "error" in record:
            raise StudentCodeFailed(self._raised(record["error"], where))
        if "got" not in record:
            raise StudentCodeFailed(f"Your code wrote something the run could not read {where}.")
        return record["got"]

    def close(self) -> None:
        kill(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.selector.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    # --- the pipe ---------------------------------------------------------------------------

    def _send(self, message: dict, where: str) -> None:
        try:
            self.proc.stdin.write(json.dumps(message, allow_nan=False).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise StudentCodeFailed(self._ended(where)) from None

    def _record(self, seconds: float, where: str, answer: bool = False) -> dict:
        """The next record, reading the student's output around it, within `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            match = self.pattern.search(self.buffer)
            if match:
                self.output += self.buffer[:match.start()]
                self.buffer = self.buffer[match.end():]
                try:
                    record = json.loads(match.group(1))
                except ValueError:
                    continue
                if isinstance(record, dict):
                    return record
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kill(self.proc)
                raise StudentCodeFailed(
                    f"Your function did not answer within {seconds:g} s {where} (an endless loop?): "
                    "the run was stopped there." if answer else
                    f"Your code did not finish {where} within {seconds:g} s: the run was stopped.")
            if not self.selector.select(timeout=remaining):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise StudentCodeFailed(self._ended(where))
            self.received += len(chunk)
            if self.received > self.limits.sandbox.output_bytes:
                kill(self.proc)
                raise StudentCodeFailed(f"Your code wrote more than {self.limits.sandbox.output_bytes // 1024} KB "
                                        f"of output {where}: the run was stopped there.")
            self.buffer += chunk

    def _ended(self, where: str) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            kill(self.proc)
            code = self.proc.wait()
        cpu = self.limits.sandbox.cpu_seconds
        if code in (-9, -24, 137, 152):  # SIGKILL / SIGXCPU: the rlimit on CPU seconds
            return f"The sandbox stopped your code {where}: it used up the run's {cpu} s of CPU time."
        return f"Your code's process ended {where} (exit status {code}) before it answered."

    def _raised(self, error: dict, where: str) -> str:
        kind, text, line = error.get("type", "Exception"), error.get("message", ""), error.get("line")
        at = f" (line {line})" if line else ""
        message = f"Your code raised {kind}{at} {where}" + (f": {text}" if text else "") + "."
        if kind in {"PermissionError", "OSError", "BlockingIOError"}:
            message += f" ({SANDBOX_RULES}.)"
        elif kind == "MemoryError":
            message += f" The sandbox allows {self.limits.sandbox.memory_bytes // 2**20} MB of memory."
        return message
