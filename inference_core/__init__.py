"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events."""
import os

# OpenMP threads that spin while waiting at a barrier steal the core a descheduled sibling needs: on this
# 2-core machine, shared with Daphne, Redis and the browser, decode ran at 4 tok/s with the default
# (spinning) policy and 23 tok/s with PASSIVE. It must be set before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import importlib  # noqa: E402

# Names resolve on first use, so `from inference_core import load_tokenizer` (the web process counting a
# prompt's tokens) never imports torch: Daphne stays small, and its garbage-collector pauses short.
_EXPORTS = {
    "Engine": "engine", "GenerationParams": "engine", "load_engine": "engine", "ModelConfig": "config",
    "load_tokenizer": "weights", "SCHEMA_VERSION": "trace", "validate_event": "trace",
    "LLMEngine": "llm_engine", "SamplingParams": "sampling", "Request": "scheduler", "SchedulerConfig": "scheduler",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
