"""The worker process's engine: loaded once, shared by the task threads, and what its batching service reports.

Steps of concurrent direct runs interleave under the engine's lock; cached generation goes through the engine's
batching service (inference_core.engine.serving), which shares forward passes between runs.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

log = logging.getLogger(__name__)


class EngineHolder:
    """The process's engine, loaded on first use (thread-safe: concurrent first calls load once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.engine = None

    @property
    def loaded(self) -> bool:
        return self.engine is not None

    def get(self):
        if self.engine is None:
            with self._lock:
                if self.engine is None:
                    from inference_core import load_engine

                    t0 = time.perf_counter()
                    self.engine = load_engine(settings.ENGINE_MODEL)
                    log.info("engine %s loaded on %s in %.1fs", settings.ENGINE_MODEL, self.engine.device,
                             time.perf_counter() - t0)
        return self.engine


ENGINE = EngineHolder()


def get_engine():
    """The process's engine (ENGINE.get())."""
    return ENGINE.get()


def kernel(engine) -> str:
    """The path a decode step of the worker's engine takes: the fused CPU step, a CUDA graph, or the reference."""
    from inference_core.engine.model_runner import runner_for
    from inference_core.kernels.cuda_graphs import graphs_enabled

    if graphs_enabled(engine.model, engine.device):
        return "cuda graph"
    return runner_for(engine.model).kernel


def engine_fields(engine) -> dict:
    """What the stats say about a loaded engine (None: not loaded, or still warming up)."""
    if engine is None:
        return {"device": None, "dtype": None, "kernel": None, "steps_by_path": {}}
    from inference_core.engine.model_runner import runner_for

    return {"device": str(engine.device), "dtype": engine.dtype_name,
            "kernel": kernel(engine),  # what a decode step runs
            # forwards per path the engine's runner took (cpu-fused-step, cuda graph paged decode, torch
            # reference): on a GPU the graph replays are the dashboard's "graph hits"
            "steps_by_path": dict(runner_for(engine.model).path_counts)}


def batch_fields() -> dict:
    """The continuous batch of the engine's batching service (cached generation): how many sequences shared the
    last forward, and what waits for a slot or KV blocks. Zeros before the service exists."""
    from inference_core.engine.serving import existing_service

    service = existing_service(settings.ENGINE_MODEL)
    batch = service.stats if service is not None else None
    return {"batch_size": batch.running if batch else 0, "max_batch_size": batch.max_batch_size if batch else 0,
            "waiting": batch.waiting if batch else 0, "kv_blocks_used": batch.blocks_used if batch else 0,
            "kv_blocks_total": batch.blocks_total if batch else 0}
