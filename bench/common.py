"""Helpers shared by the benchmarks (and the engine tests): the machine's memory-bandwidth roofline, robust timing,
and a block run under other engine settings."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch

from inference_core import GenerationParams
from inference_core.engine.trace import TokenStep
from inference_core.model.config import EngineSettings, engine_settings


def measure_read_bandwidth(n_bytes: int = 512 * 2**20, repeats: int = 7, device: str = "cpu") -> float:
    """Best-of-N GB/s of a streaming read (a sum over a buffer far larger than the caches).

    A sum reads every byte once and writes almost nothing: the same traffic pattern as a decode
    step reading its weights, so it is the ceiling that step can reach on this machine (or GPU).
    """
    buf = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if buf.is_cuda else (lambda: None)
    buf.sum()  # fault the pages in
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        buf.sum()
        sync()
        best = min(best, time.perf_counter() - t0)
    return n_bytes / best / 1e9


def median_time(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def settings_env(settings: EngineSettings) -> dict[str, str]:
    """The environment that `EngineSettings.from_env` reads back as `settings`."""
    return {"INFERENCE_DEVICE": settings.device or "", "INFERENCE_DTYPE": settings.dtype or "",
            "INFERENCE_CPU_FASTPATH": str(int(settings.cpu_fastpath)),
            "INFERENCE_QUANT_KERNELS": "" if settings.quant_kernels else "torch", "INFERENCE_INT_DOT": settings.int_dot,
            "INFERENCE_CUDA_GRAPHS": str(int(settings.cuda_graphs)), "INFERENCE_COMPILE": str(int(settings.compile)),
            "INFERENCE_LAB_CACHE": str(settings.cache_dir)}


@contextmanager
def settings_override(**changes) -> Iterator[EngineSettings]:
    """Run a block with some engine settings changed (their environment variables), then restore them."""
    new = replace(engine_settings(), **changes)
    env = settings_env(new)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield new
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# The decode benchmark's prompt and its measurement, shared by bench/decode.py, llama_cpp.py and demo_step.py.
PROMPT = "Write a short story about a robot who learns to paint. Once upon a time"


def ours_decode_tps(engine, ids, n_tokens: int) -> tuple[float, float]:
    """(decode tokens/s, mean KV bytes read per decode step) from the trace's own step times."""
    steps = [e for e in engine.generate_events(ids, GenerationParams(max_new_tokens=n_tokens, stop_at_eos=False))
             if isinstance(e, TokenStep)]
    decode = steps[1:]
    kv = statistics.mean(s.kv_bytes_total for s in decode)
    return len(decode) / sum(s.step_time_s for s in decode), kv
