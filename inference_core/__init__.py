"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events. The
public API, resolved on first use (importing it loads no torch). Layers and design notes: docs/engine-notes.md."""
import importlib

_EXPORTS = {name: module for module, names in {  # each public name → the module that defines it
    "inference_core.model.config": ("DEFAULT_MODEL", "ModelConfig"),
    "inference_core.model.weights": ("load_tokenizer",),
    "inference_core.model.sampling": ("SamplingParams",),
    "inference_core.engine.loaded_model": ("LoadedModel", "GenerationParams", "load_engine"),
    "inference_core.engine.llm_engine": ("LLMEngine", "run_batch"),
    "inference_core.engine.scheduler": ("Request", "SchedulerConfig"),
    "inference_core.engine.trace": ("SCHEMA_VERSION", "TraceEvent", "RunFinished", "TokenStep", "validate_event"),
}.items() for name in names}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
