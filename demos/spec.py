"""What a demo is: its parameters (`ParamSpec`) and its spec (`DemoSpec`: title, parameters with defaults and
limits, runner, check, JS module, presets, "what to try next").

Each demo declares one `DemoSpec` next to its runner in `demos/catalog/<name>.py`; `demos.catalog.DEMOS` collects
them and `demos.registry` validates parameters against them. The page embeds `DemoSpec.describe()` and the demo's
script reads its defaults, limits and choices from there, so a default lives in one place only.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from django.conf import settings


class DemoParamError(ValueError):
    """A demo name or parameter that cannot be accepted. `code` is stable and machine-readable."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


_MISSING = object()


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a demo.

    kind: "str" | "int" | "float" | "bool" | "choice".
    For "str" with `max_tokens`, the text is tokenized (tokenizer only, no weights) and limited.
    `max_value` may be a callable so that limits can follow settings at validation time.
    `limits` names the limits of a structured value that the demo's check enforces (the page reads them).
    """

    kind: str
    default: Any = _MISSING
    label: str = ""
    help: str = ""
    min_value: float | None = None
    max_value: float | Callable[[], float] | None = None
    choices: tuple = ()
    max_chars: int | None = None
    max_tokens: Callable[[], int] | int | None = None
    nullable: bool = False
    # Limits of a structured value that the demo's check enforces (e.g. a workload's most requests), named so the
    # page's script reads them from the spec instead of repeating them.
    limits: dict = field(default_factory=dict)

    @property
    def required(self) -> bool:
        return self.default is _MISSING

    def resolved_max(self):
        return self.max_value() if callable(self.max_value) else self.max_value

    def resolved_max_tokens(self):
        return self.max_tokens() if callable(self.max_tokens) else self.max_tokens

    def describe(self) -> dict:
        """A JSON-able description for front ends (form building, authoring help)."""
        d = {"kind": self.kind, "label": self.label, "help": self.help, "required": self.required}
        if not self.required:
            d["default"] = self.default
        if self.min_value is not None:
            d["min"] = self.min_value
        if self.max_value is not None:
            d["max"] = self.resolved_max()
        if self.choices:
            d["choices"] = list(self.choices)
        if self.max_tokens is not None:
            d["max_tokens"] = self.resolved_max_tokens()
        if self.limits:
            d["limits"] = dict(self.limits)
        return d


@dataclass(frozen=True)
class DemoSpec:
    name: str
    title: str
    params: dict[str, ParamSpec]
    # runner(params: dict, should_stop=None, *, models) -> Iterator[dict] of trace-event dicts (or
    # "module:function"). It is given clean params (`validate`, plus "model"), so it reads them without defaults of
    # its own, and the caller's loaded models (`catalog.runner.Models`; the worker's: a second run reuses them).
    runner: Callable[..., Iterator[dict]] | str
    description: str = ""
    module: str = ""  # static ES module path under static/js/demos/
    presets: tuple = field(default_factory=tuple)
    # check(params) of the cleaned params' structure (raises ValueError with a readable message; or "module:function"),
    # so a bad structured value is refused at `start`, before the run is queued, not in the worker.
    check: Callable[[dict], None] | str | None = None
    # Runs whose output is their own timings: a replay of one shows another run's measurements, so the page
    # names when, on which device and with which engine version they were taken (the run's `header`).
    measures_time: bool = False
    # "What to try next": one or two concrete changes to make after a run, shown under the demo once a run is done.
    try_next: tuple = field(default_factory=tuple)

    def load_runner(self) -> Callable[..., Iterator[dict]]:
        return _load(self.runner)

    def load_check(self) -> Callable[[dict], None] | None:
        return _load(self.check) if self.check else None

    def defaults(self) -> dict:
        """Every optional parameter's default (what `validate` fills in)."""
        return {k: p.default for k, p in self.params.items() if not p.required}

    def with_defaults(self, params: dict) -> dict:
        """`params` with the defaults of the parameters it leaves out (a runner called outside the worker)."""
        return {**self.defaults(), **params}

    def describe(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "params": {k: p.describe() for k, p in self.params.items()},
            "presets": list(self.presets),
            "measures_time": self.measures_time,
            "try_next": list(self.try_next),
        }


def _load(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def max_new_tokens_limit() -> int:
    return int(settings.DEMO_MAX_NEW_TOKENS)


def max_prompt_tokens_limit() -> int:
    return int(settings.DEMO_MAX_PROMPT_TOKENS)
