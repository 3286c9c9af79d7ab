"""Typed trace events: the versioned contract between the engine and the pages."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Union

SCHEMA_VERSION = 1


class TraceEventError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class TraceEvent:
    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # shallow, unlike asdict
        return {"type": self.type, "schema_version": SCHEMA_VERSION, **fields}


def event_types() -> dict[str, type[TraceEvent]]:
    """Every event type by name: the `TraceEvent` subclasses named by `event`, in every module imported so far."""
    found: dict[str, type[TraceEvent]] = {}
    stack = [TraceEvent]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if "type" in sub.__dict__:
                found[sub.type] = sub
    return found


def event(name: str):
    """Class decorator: make a frozen dataclass event of type `name` (a `TraceEvent` subclass)."""

    def wrap(cls):
        if name in event_types():
            raise TraceEventError(f"event type {name!r} defined twice")
        cls = dataclasses.dataclass(frozen=True)(cls)
        cls.type = name
        return cls

    return wrap


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (inner,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_matches(v, inner) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def validate_event(data: dict[str, Any]) -> dict[str, Any]:
    """Raise TraceEventError unless `data` is a well-formed event of a known type; returns it."""
    if not isinstance(data, dict):
        raise TraceEventError("event must be an object")
    cls = event_types().get(data.get("type"))
    if cls is None:
        raise TraceEventError(f"unknown event type {data.get('type')!r}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise TraceEventError(f"schema_version {data.get('schema_version')!r} != {SCHEMA_VERSION}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    extra = set(data) - names - {"type", "schema_version"}
    if extra:
        raise TraceEventError(f"{cls.type}: unexpected fields {sorted(extra)}")
    for name in names:
        if name not in data:
            raise TraceEventError(f"{cls.type}: missing field {name!r}")
        if not _matches(data[name], hints[name]):
            raise TraceEventError(f"{cls.type}.{name}: {data[name]!r} is not {hints[name]}")
    return data


@event("run_started")
class RunStarted(TraceEvent):
    model: str
    device: str
    dtype: str
    prompt_token_ids: list[int]
    prompt_tokens: list[str]
    params: dict
    n_layers: int
    kv_bytes_per_token: int


@event("token")
class TokenStep(TraceEvent):
    """One forward pass that produced one token. The first comes from prefill, the rest from decode."""
    phase: typing.Literal["prefill", "decode"]
    step: int
    token_id: int
    text: str
    position: int
    n_input_tokens: int  # tokens fed to this forward: prompt length at prefill, 1 per cached decode
    step_time_s: float
    kv_bytes_total: int
    kv_bytes_per_layer: list[int]
    flops: float
    bytes_moved: float
    batch_size: int = 1  # requests that shared this forward (the batching service runs several at once)


@event("sampling_step")
class SamplingStep(TraceEvent):
    """How the token of `step` was chosen (`SamplingParams.trace_top`): the top tokens by logit, most likely first;
    the cut keeps the first `n_kept` of that order, and the draw uses their probs_t ÷ kept_mass."""
    step: int
    token_id: int
    rank: int  # the drawn token's place in that order (0: the most likely)
    top_ids: list[int]
    top_texts: list[str]
    logits: list[float]  # after the repetition penalty
    probs: list[float]  # their softmax (temperature 1)
    probs_t: list[float]  # after temperature (greedy: 1 for the argmax)
    n_kept: int  # tokens of the whole vocabulary that top-k, top-p and min-p keep
    kept_mass: float  # their share of the probs_t mass


@event("run_finished")
class RunFinished(TraceEvent):
    token_ids: list[int]
    text: str
    finish_reason: typing.Literal["length", "eos", "cancelled"]
    n_prompt_tokens: int
    n_generated: int
    ttft_s: float
    tpot_s: float
    tokens_per_s: float
    kv_bytes: int
