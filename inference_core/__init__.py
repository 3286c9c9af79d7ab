"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events.

The package is layered, each layer importing only those below it:

    cli/          `python -m inference_core …`: one sub-command per feature
    speculative/  draft, verify, accept
    engine/       LLMEngine.step → Scheduler → ModelRunner, over the paged KV pool; trace events
    quant/        quantized formats, their linear layers, the quantized copy of a model, the report
    kernels/      fused CPU step, oneDNN, CUDA graphs, flash attention, C++ and Triton kernels
    model/        config, Transformer, weights, tokenizer, sampling

This module is the public API the web side and the benches use: names resolve on first use, so
`from inference_core import load_tokenizer` (the web process counting a prompt's tokens) never imports torch:
Daphne stays small, and its garbage-collector pauses short. Importing it changes nothing in the process (the
OpenMP wait policy is set where a process starts: the CLI, the Celery app, the Makefile).
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
