"""Turn what the sandbox reported into test results the page can show.

The worker grades: the harness only ran the cases, so expected values never entered the sandbox. A visible test's
result carries its input, the expected value, what the function returned and a message; a hidden test's carries its
name, whether it passed and a generic message, never its input, expected value, return value or exception text.
"""
from __future__ import annotations

import math
import signal
from typing import Any

from .catalog.base import Case, counts_to_frequencies, percent_table
from .sandbox import Limits, RawRun

SHOWN_LIMIT = 600  # characters of an input, expected or returned value on the page
SANDBOX_RULES = "the sandbox has no network, no new processes or threads, and only /tmp is writable"


def same(expected: Any, got: Any, rel_tol: float = 1e-9, abs_tol: float = 0.0) -> bool:
    """Whether `got` (decoded from JSON) equals `expected`: numbers within the tolerances, structures item by item."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return False
        if isinstance(expected, int) and isinstance(got, int):
            return got == expected
        return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, (list, tuple)):
        return isinstance(got, list) and len(got) == len(expected) and all(
            same(e, g, rel_tol, abs_tol) for e, g in zip(expected, got))
    if isinstance(expected, dict):
        return isinstance(got, dict) and set(got) == set(expected) and all(
            same(expected[k], got[k], rel_tol, abs_tol) for k in expected)
    return False


def fmt(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"raises"}:
        text = f"raises {value['raises']}"
    elif isinstance(value, dict) and set(value) == {"repr"}:
        text = str(value["repr"])
    else:
        text = repr(value)
    return text if len(text) <= SHOWN_LIMIT else text[:SHOWN_LIMIT] + "…"


def _args(args: list, kwargs: dict) -> str:
    return ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


def shown_input(case: Case) -> str:
    if case.shown:
        return case.shown
    c = case.call
    if c.get("kind") == "ops":
        lines = [f"a = {c['fn']}({_args(c.get('init', []), {})})"]
        lines += [f"a.{method}({_args(args, {})})" for method, args in c["steps"]]
        text = "\n".join(lines)
    else:
        text = f"{c['fn']}({_args(c.get('args', []), c.get('kwargs', {}))})"
    return text if len(text) <= SHOWN_LIMIT * 2 else text[:SHOWN_LIMIT * 2] + "…"


def _per_step(case: Case, values: list) -> str:
    return "\n".join(f"a.{m}(…) → {fmt(v)}" for (m, _), v in zip(case.call["steps"], values))


def shown_expected(case: Case) -> str:
    if case.expected_shown:
        return case.expected_shown
    if case.call.get("kind") == "ops":
        return _per_step(case, case.expected)
    return fmt(case.expected)


def shown_got(case: Case, got: Any) -> str:
    if case.call.get("kind") == "repeat":
        freqs = counts_to_frequencies(got)
        return percent_table(freqs) if freqs else fmt(got)
    if case.call.get("kind") == "ops" and isinstance(got, list):
        return _per_step(case, got)
    return fmt(got)


def mismatch(case: Case, got: Any) -> str | None:
    """None when `got` passes `case`, else a message saying where it differs."""
    if case.check is not None:
        return case.check(got)
    if same(case.expected, got, case.rel_tol, case.abs_tol):
        return None
    if case.call.get("kind") == "ops" and isinstance(got, list) and len(got) == len(case.expected):
        for i, (step, want, have) in enumerate(zip(case.call["steps"], case.expected, got), start=1):
            if not same(want, have, case.rel_tol, case.abs_tol):
                method, args = step
                return f"Step {i}, a.{method}({_args(args, {})}): expected {fmt(want)}, got {fmt(have)}."
    if isinstance(case.expected, dict) and isinstance(got, dict) and set(got) == set(case.expected):
        wrong = [f"{k!r}: expected {fmt(v)}, got {fmt(got[k])}" for k, v in case.expected.items()
                 if not same(v, got[k], case.rel_tol, case.abs_tol)]
        return "Wrong " + "; ".join(wrong) + "."
    return f"Expected {shown_expected(case)}, got {fmt(got)}."


def describe_error(error: dict, limits: Limits) -> str:
    kind, text, line = error.get("type", "Exception"), error.get("message", ""), error.get("line")
    where = f" (line {line})" if line else ""
    message = f"Your code raised {kind}{where}" + (f": {text}" if text else "") + "."
    if kind == "MemoryError":
        message += f" The sandbox allows {limits.memory_bytes // 2**20} MB of memory."
    elif kind in {"PermissionError", "OSError", "FileNotFoundError", "RuntimeError"}:
        message += f" ({SANDBOX_RULES}.)"
    return message


def run_ended(run: RawRun, limits: Limits) -> str:
    """Why a run stopped before its harness said it was done."""
    if run.overflow:
        return f"Stopped: your code wrote more than {limits.output_bytes // 1024} KB of output."
    if run.timed_out:
        return f"Stopped after {limits.wall_seconds:g} s: your code was still running (an endless loop?)."
    code = run.returncode
    number = code - 128 if code is not None and code > 128 else (-code if code is not None and code < 0 else 0)
    if number == signal.SIGXCPU:
        return f"Stopped: your code used more than {limits.cpu_seconds} s of CPU time (an endless loop?)."
    if number == signal.SIGKILL:
        return f"Stopped (killed): usually the {limits.cpu_seconds} s CPU-time limit."
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"Your code crashed the Python process ({name})."
    return f"Your code ended the process (exit status {code})."


def grade(cases: list[Case], run: RawRun, limits: Limits, hidden: bool = False) -> tuple[list[dict], str]:
    """Each case's result from one run, and the run's own problem ('' when none: its code loaded and finished)."""
    results = {r["case"]: r for r in run.records if "case" in r}
    started = {r["start"] for r in run.records if "start" in r}
    load_error = next((r["load_error"] for r in run.records if "load_error" in r), None)
    problem = ""
    if load_error is not None:
        problem = "Your code does not load: " + describe_error(load_error, limits).removeprefix("Your code raised ")
    elif not run.done:
        problem = run_ended(run, limits) if run.records or run.timed_out or run.overflow else (
            f"The sandbox could not start your code (exit status {run.returncode}).")
    graded = []
    for index, case in enumerate(cases):
        record = results.get(index)  # the harness numbers a job's cases from 0 (exercises/runner.py)
        has_got = record is not None and "got" in record
        got = record["got"] if has_got else None
        if has_got:
            message = mismatch(case, got) or ""
            if hidden and message:
                message = "A hidden test failed (its input is not shown)."
            elif message and case.hint:
                message += " " + case.hint
        elif record is not None:
            error = record.get("error") or {}
            message = (f"Your code raised {error.get('type', 'an exception')} on a hidden input." if hidden
                       else describe_error(error, limits))
        elif load_error is not None:
            message = "Not run: your code does not load."
        elif index in started:
            message = problem
        else:
            message = "Not run: an earlier test stopped the sandbox."
        passed = has_got and not message
        if hidden:
            graded.append({"name": f"Hidden test {index + 1}", "hidden": True, "passed": passed, "message": message})
            continue
        graded.append({"name": case.name, "hidden": False, "passed": passed, "input": shown_input(case),
                       "expected": shown_expected(case), "got": shown_got(case, got) if has_got else "",
                       "message": message})
    return graded, problem
