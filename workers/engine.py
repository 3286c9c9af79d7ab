"""The worker process's models: loaded once, shared by the task threads, and what its batching service reports.

Steps of concurrent direct runs interleave under the engine's lock; cached generation goes through the engine's
batching service (workers.serving), which shares forward passes between runs.
"""
from __future__ import annotations

import threading

from django.conf import settings


class WorkerModels:
    """What the worker process owns of the engine: its `LoadedModels` (every model a run asked for, and their
    batching services), made when the worker starts and handed to each run's runner, so a second run finds the
    weights loaded, the kernels compiled and the service running. The torch side is imported on first use: a
    `cpu`-only worker (narration) never loads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models = None

    @property
    def models(self):
        """The worker's `workers.serving.LoadedModels` (made on first use)."""
        if self._models is None:
            with self._lock:  # two task threads asking first still share one
                if self._models is None:
                    from .serving import LoadedModels

                    self._models = LoadedModels()
        return self._models

    @property
    def engine(self):
        """The worker's engine model if it is loaded (never loads it: for stats readers)."""
        return self._models.loaded(settings.ENGINE_MODEL) if self._models is not None else None

    @property
    def loaded(self) -> bool:
        return self.engine is not None

    def get(self):
        """The worker's engine model (settings.ENGINE_MODEL), loaded on first use."""
        return self.engine or self.models.get(settings.ENGINE_MODEL)  # LoadedModels logs the load


ENGINE = WorkerModels()


def get_engine():
    """The process's engine (ENGINE.get())."""
    return ENGINE.get()


def kernel(engine) -> str:
    """The path a decode step of the worker's engine takes: the fused CPU step, a CUDA graph, or the reference."""
    from inference_core.engine.model_runner import runner_for
    from inference_core.kernels.paged_graphs import graphs_enabled

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
    service = ENGINE.models.existing_service(settings.ENGINE_MODEL) if ENGINE.loaded else None
    batch = service.stats if service is not None else None
    return {"batch_size": batch.running if batch else 0, "max_batch_size": batch.max_batch_size if batch else 0,
            "waiting": batch.waiting if batch else 0, "kv_blocks_used": batch.blocks_used if batch else 0,
            "kv_blocks_total": batch.blocks_total if batch else 0}
