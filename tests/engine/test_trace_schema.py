"""docs/trace-schema*.md and the registered event dataclasses must describe the same contract."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import pytest

import inference_core
from inference_core.engine.trace import SCHEMA_VERSION, event_types, TokenStep, TraceEventError, validate_event

ROOT = Path(__file__).resolve().parents[2]


def _all_docs() -> str:
    docs = [ROOT / "docs" / "trace-schema.md", *sorted((ROOT / "docs" / "trace-schema").glob("*.md"))]
    return "\n".join(p.read_text() for p in docs if p.exists())


def _import_all_engine_modules() -> None:
    """Events register on import: import every engine module, and the course demos' own events (declared in the
    demos app, demos/catalog/events.py), so none is missed."""
    for mod in pkgutil.walk_packages(inference_core.__path__, "inference_core."):
        if mod.name.endswith("__main__"):
            continue
        importlib.import_module(mod.name)
    importlib.import_module("demos.catalog.events")


def test_every_event_type_and_field_is_documented():
    _import_all_engine_modules()
    text = _all_docs()
    assert f"version {SCHEMA_VERSION}" in text
    for name, cls in event_types().items():
        assert f"`{name}`" in text, f"event {name!r} is not documented in docs/trace-schema*"
        for field in dataclasses.fields(cls):
            assert f"`{field.name}`" in text, f"{name}.{field.name} is not documented"


def _token(**overrides):
    base = dict(phase="decode", step=1, token_id=5, text="a", position=9, n_input_tokens=1, step_time_s=0.01,
                kv_bytes_total=10, kv_bytes_per_layer=[5, 5], flops=1.0, bytes_moved=2.0)
    base.update(overrides)
    return TokenStep(**base).to_dict()


def test_validate_accepts_a_real_event_and_rejects_broken_ones():
    assert validate_event(_token())["type"] == "token"
    with pytest.raises(TraceEventError, match="unknown event type"):
        validate_event({"type": "nope", "schema_version": SCHEMA_VERSION})
    with pytest.raises(TraceEventError, match="schema_version"):
        validate_event({**_token(), "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(TraceEventError, match="missing field"):
        bad = _token()
        del bad["position"]
        validate_event(bad)
    with pytest.raises(TraceEventError, match="phase"):
        validate_event(_token(phase="warmup"))
    with pytest.raises(TraceEventError, match="kv_bytes_per_layer"):
        validate_event(_token(kv_bytes_per_layer=[1.5]))
    with pytest.raises(TraceEventError, match="unexpected"):
        validate_event({**_token(), "extra": 1})
