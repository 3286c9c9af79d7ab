"""The course's live demos, one module each: `demos/catalog/<name>.py` holds the demo's `SPEC` (parameters with
their defaults and limits, presets, the JS module that draws it, "what to try next") next to its runner
`run(params, should_stop=None, *, models) -> Iterator[dict]` of trace events (`models`: the caller's loaded
models, `runner.Models`: the worker's in a worker) (and `check_params` where a structured value needs checking
before a run is queued). Course-only trace events are declared in `events.py`.

The engine (`inference_core`) knows nothing of the course: runners call its public API. Every module here imports
the engine (and torch) inside `run`, so the web process can import the catalog, validate and embed without them.
"""
from __future__ import annotations

from ..spec import DemoSpec
from . import (attention, attention_variants, batching, flash_attention, kv_cache, paged_attention, prefill_decode,
               prefix_caching, quantization, sampling, serving_load, serving_metrics, speculative,
               tensor_parallel)
from . import long_context  # long context: eviction under a cache budget
from . import structured_output  # structured output: a grammar's token mask per step
from . import token_cost  # what a token costs: dollars per million at growing batch sizes
from . import gguf_inspect  # the local ecosystem: the course model's GGUF file, tensor by tensor

# The order pages list them in (the course's order: the primer's attention demo first).
MODULES = (attention, kv_cache, attention_variants, long_context, prefill_decode, flash_attention, serving_load,
           speculative, paged_attention, batching, prefix_caching, quantization, sampling, structured_output,
           serving_metrics, token_cost, tensor_parallel, gguf_inspect)

DEMOS: dict[str, DemoSpec] = {m.SPEC.name: m.SPEC for m in MODULES}

__all__ = ["DEMOS", "MODULES"]
