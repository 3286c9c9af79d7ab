"""Run one submission: its visible tests and its hidden tests in two sandboxes at once, then grade both.

The hidden tests get a sandbox of their own whose output is thrown away: in the visible tests' process the
student's code could find any input the harness holds (it shares the interpreter) and print it, so hidden inputs
are never in a process whose output reaches the browser. What comes back from the hidden run is a pass or fail per
test, graded here against expected values the sandbox never saw.
"""
from __future__ import annotations

import time

from .catalog import Exercise
from .catalog.base import Case
from .grading import grade
from .sandbox import Limits, RawRun, run_many, started

DEFAULT_LIMITS = Limits()


def payload(cases: list[Case]) -> list[dict]:
    """The cases as the harness reads them: numbered from 0, the call only (no expected values, no names)."""
    return [{"id": index, "call": case.call} for index, case in enumerate(cases)]


def evaluate(exercise: Exercise, code: str, limits: Limits = DEFAULT_LIMITS) -> dict:
    """The graded result of `code` on every test of `exercise`, as stored and shown (hidden tests sanitized).

    Raises sandbox.SandboxUnavailable when this machine cannot sandbox (nothing has run then)."""
    t0 = time.monotonic()
    visible, hidden = exercise.visible, exercise.hidden
    jobs = [(code, payload(visible))] + ([(code, payload(hidden))] if hidden else [])
    runs: list[RawRun] = run_many(jobs, limits)
    for raw in runs:
        started(raw)
    tests, problem = grade(visible, runs[0], limits)
    if hidden:
        tests += grade(hidden, runs[1], limits, hidden=True)[0]
    n_passed = sum(t["passed"] for t in tests)
    shown = runs[0]
    return {
        "passed": n_passed == len(tests),
        "n_passed": n_passed,
        "n_tests": len(tests),
        "tests": tests,
        "problem": problem,  # why the visible run stopped early ('' when it did not)
        "output": shown.output,  # the visible run's prints only: the hidden run's are discarded
        "output_dropped": shown.output_dropped,
        "seconds": round(time.monotonic() - t0, 3),
    }
