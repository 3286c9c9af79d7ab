"""What an exercise is: its page (title, prompt, starter code), its tests, and a reference solution.

A Case says what the harness calls (`call`, sent into the sandbox) and what the worker expects back (`expected`,
or `check` for a statistical test), which never enters the sandbox. A hidden case is graded the same way but its
input, expected value and result are never sent to the browser, and it runs in a sandbox of its own whose output
is discarded (exercises/runner.py).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# A statistical check: the function's result (e.g. {token: count}) → None when it passes, else why not.
Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Case:
    name: str
    call: dict  # the harness driver's arguments (exercises/harness.py: call, ops, repeat)
    expected: Any = None
    hidden: bool = False
    rel_tol: float = 1e-9
    abs_tol: float = 0.0
    check: Check | None = None
    shown: str = ""  # how the input reads on the page; empty: written from `call`
    expected_shown: str = ""  # how the expected value reads; empty: its repr
    hint: str = ""  # added to a visible case's failure message


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    prompt: str  # Markdown
    starter: str
    reference: str  # a right answer: the test suite proves every case passes on it and fails on the starter
    cases: tuple[Case, ...]
    summary: str = ""
    functions: tuple[str, ...] = field(default=())

    @property
    def visible(self) -> list[Case]:
        return [c for c in self.cases if not c.hidden]

    @property
    def hidden(self) -> list[Case]:
        return [c for c in self.cases if c.hidden]


def call(fn: str, *args: Any, **kwargs: Any) -> dict:
    return {"kind": "call", "fn": fn, "args": list(args), "kwargs": kwargs}


def ops(cls: str, init: list, steps: list[tuple[str, list]]) -> dict:
    return {"kind": "ops", "fn": cls, "init": init, "steps": [[m, list(a)] for m, a in steps]}


def repeat(fn: str, args: list, n: int, seed: int, gen: str) -> dict:
    return {"kind": "repeat", "fn": fn, "args": args, "n": n, "seed": seed, "gen": gen}


def counts_to_frequencies(got: Any) -> dict[int, float] | None:
    """The harness's {json(result): count} → {token: frequency}; None when the results were not tokens."""
    if not isinstance(got, dict) or not got:
        return None
    counts: dict[int, int] = {}
    for key, count in got.items():
        try:
            token = json.loads(key)
        except (TypeError, ValueError):
            return None
        if isinstance(token, bool) or not isinstance(token, int) or not isinstance(count, int):
            return None
        counts[token] = counts.get(token, 0) + count
    total = sum(counts.values())
    return {token: count / total for token, count in counts.items()} if total else None


def percent_table(dist: dict[int, float]) -> str:
    return ", ".join(f"token {t}: {p:.1%}" for t, p in sorted(dist.items()))


def matches_distribution(target: dict[int, float], max_tv: float) -> Check:
    """A check that the sampled tokens' frequencies are within total-variation distance `max_tv` of `target`."""

    def check(got: Any) -> str | None:
        freqs = counts_to_frequencies(got)
        if freqs is None:
            return "Your function should return a token index (an int) every time."
        tokens = set(target) | set(freqs)
        tv = sum(abs(freqs.get(t, 0.0) - target.get(t, 0.0)) for t in tokens) / 2
        if tv <= max_tv:
            return None
        return (f"The tokens you returned came out as {percent_table(freqs)}; the target is "
                f"{percent_table(target)} (total-variation distance {tv:.3f}, allowed {max_tv}).")

    return check
