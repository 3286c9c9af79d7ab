"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events.

The public API, resolved on first use (importing it loads no torch). Layers and design notes: docs/engine-notes.md.
"""
import importlib

_EXPORTS = {
    "DEFAULT_MODEL": "inference_core.model.config",
    "ModelConfig": "inference_core.model.config",
    "load_tokenizer": "inference_core.model.weights",
    "SamplingParams": "inference_core.model.sampling",
    "LoadedModel": "inference_core.engine.loaded_model",
    "GenerationParams": "inference_core.engine.loaded_model",
    "load_engine": "inference_core.engine.loaded_model",
    "LLMEngine": "inference_core.engine.llm_engine",
    "run_batch": "inference_core.engine.llm_engine",
    "Request": "inference_core.engine.scheduler",
    "SchedulerConfig": "inference_core.engine.scheduler",
    "SCHEMA_VERSION": "inference_core.engine.trace",
    "TraceEvent": "inference_core.engine.trace",
    "RunFinished": "inference_core.engine.trace",
    "TokenStep": "inference_core.engine.trace",
    "validate_event": "inference_core.engine.trace",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
