"""The demo registry: which demos exist, what parameters they take, and how to validate them.

One registry serves the websocket consumer (a `start` message), the standalone demo page and the
course authoring UI (`:::{demo}` directives). Each demo's spec lives with its runner in
`demos/catalog/<name>.py` (`DEMOS` collects them; `DemoSpec`/`ParamSpec` are in `demos/spec.py`).
`validate(name, params)` returns the cleaned params (defaults filled in, types checked, limits applied)
or raises `DemoParamError(code, message)`.
"""
from __future__ import annotations

import math
from typing import Any

from django.apps import apps
from django.conf import settings

from .catalog import DEMOS
from .spec import DemoParamError, DemoSpec, ParamSpec

__all__ = ["DEMOS", "DemoParamError", "DemoSpec", "ParamSpec", "count_tokens", "get_spec", "is_deterministic",
           "validate"]


def count_tokens(text: str) -> int:
    try:
        tok = apps.get_app_config("demos").tokenizers.get(settings.ENGINE_MODEL)
    except Exception as exc:  # the engine package is missing or broken: say so, don't guess
        raise DemoParamError("engine_unavailable", f"cannot load the tokenizer: {exc}") from exc
    return len(tok.encode(text))


# Runs the socket starts that no page or lesson lists: a passing sampler's live run (added by exercises/apps.py).
STARTED_ELSEWHERE: dict[str, DemoSpec] = {}


def get_spec(name: Any) -> DemoSpec:
    if not isinstance(name, str) or (name not in DEMOS and name not in STARTED_ELSEWHERE):
        shown = name if isinstance(name, str) and len(name) <= 64 else type(name).__name__
        raise DemoParamError("unknown_demo", f"unknown demo {shown!r}; known: {', '.join(sorted(DEMOS))}")
    return DEMOS.get(name) or STARTED_ELSEWHERE[name]


def _clean_one(key: str, spec: ParamSpec, value: Any) -> Any:
    if value is None and spec.nullable:
        return None
    kind = spec.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise DemoParamError("invalid_param", f"{key} must be true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise DemoParamError("invalid_param", f"{key} must be an integer")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DemoParamError("invalid_param", f"{key} must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise DemoParamError("invalid_param", f"{key} must be finite")
    elif kind == "str":
        if not isinstance(value, str):
            raise DemoParamError("invalid_param", f"{key} must be a string")
        if not value.strip():
            raise DemoParamError("invalid_param", f"{key} must not be empty")
        if spec.max_chars is not None and len(value) > spec.max_chars:
            raise DemoParamError("param_too_long", f"{key} is longer than {spec.max_chars} characters")
        limit = spec.resolved_max_tokens()
        if limit is not None:
            n = count_tokens(value)
            if n > limit:
                raise DemoParamError("param_too_long", f"{key} is {n} tokens; the limit is {limit}")
        return value
    elif kind == "choice":
        if value not in spec.choices:
            raise DemoParamError("invalid_param", f"{key} must be one of {list(spec.choices)}")
        return value
    else:  # pragma: no cover - a programming error in a DemoSpec
        raise DemoParamError("invalid_param", f"{key}: unsupported parameter kind {kind}")
    lo, hi = spec.min_value, spec.resolved_max()
    if lo is not None and value < lo:
        raise DemoParamError("param_out_of_range", f"{key} must be at least {lo}")
    if hi is not None and value > hi:
        raise DemoParamError("param_out_of_range", f"{key} must be at most {hi}")
    return value


def validate(name: Any, params: Any) -> dict:
    """Return cleaned params for demo `name`, or raise DemoParamError."""
    spec = get_spec(name)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise DemoParamError("invalid_params", "params must be a JSON object")
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise DemoParamError("unknown_param", f"unknown parameter(s) for {spec.name}: {', '.join(map(str, unknown))[:200]}")
    cleaned = {}
    for key, pspec in spec.params.items():
        if key in params:
            cleaned[key] = _clean_one(key, pspec, params[key])
        elif pspec.required:
            raise DemoParamError("missing_param", f"{key} is required")
        else:
            cleaned[key] = pspec.default
    check = spec.load_check()
    if check is not None:
        try:
            check(cleaned)
        except ValueError as exc:
            raise DemoParamError("invalid_param", str(exc)[:300]) from None
    return cleaned


def is_deterministic(name: str, params: dict) -> bool:
    """Greedy decoding or a fixed seed gives the same tokens for the same inputs. Only such a run may be replayed
    when no worker slot is free (its timings are the stored run's, and the page labels them as such)."""
    get_spec(name)
    if "temperature" in params and params["temperature"] not in (0, 0.0):
        return params.get("seed") is not None
    return True
