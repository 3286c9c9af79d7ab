"""This machine's roofline and decode speed, measured: memory bandwidth (a large tensor copy), fp32 matmul
FLOP/s, and the batch-1 decode step time of a real model."""
from __future__ import annotations

import statistics
import time
from datetime import datetime, timezone

import torch

from inference_core.engine.loaded_model import GenerationParams
from inference_core.engine.trace import TokenStep
from inference_core.model.loader import device_name

DECODE_PROMPT = "The capital of France is"

# (copy MiB, matmul n, repeats, decode steps). `full` costs about a second on the 2-core course server;
# `quick` (tests) a few tenths: the same measurements, smaller and fewer.
SIZES = {"full": (256, 1024, 7, 8), "quick": (64, 512, 2, 2)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()  # not the device: another thread may be capturing


def median_time(fn, repeats: int, device: torch.device | str = "cpu") -> float:
    """Median wall time of `fn()` over `repeats` runs after one warm-up (page faults, thread pool start)."""
    device = torch.device(device)
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(n_bytes: int = 256 * 2**20, repeats: int = 7, device: torch.device | str = "cpu") -> float:
    """Bytes/s of dst.copy_(src): each copy reads n_bytes and writes n_bytes."""
    src = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return 2 * n_bytes / median_time(lambda: dst.copy_(src), repeats, device)


def matmul_flops(n: int = 1024, repeats: int = 7, device: torch.device | str = "cpu") -> float:
    """fp32 FLOP/s of an n × n × n matrix multiply."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    return 2 * n**3 / median_time(lambda: a @ b, repeats, device)


def decode_step(engine, steps: int = 8, prompt: str = DECODE_PROMPT) -> tuple[float, float]:
    """(median seconds, median bytes moved) of one batch-1 greedy decode step, from the engine's trace."""
    params = GenerationParams(max_new_tokens=steps + 1, stop_at_eos=False)
    decode = [e for e in engine.generate(prompt, params) if isinstance(e, TokenStep) and e.phase == "decode"]
    if not decode:
        raise RuntimeError("the engine produced no decode step")
    return statistics.median(e.step_time_s for e in decode), statistics.median(e.bytes_moved for e in decode)


def warm_up(engine, prompt: str = DECODE_PROMPT) -> float:
    """Seconds of one prefill and one decode step: first use, kept out of `decode_step`'s figures."""
    t0 = time.perf_counter()
    for _ in engine.generate(prompt, GenerationParams(max_new_tokens=2, stop_at_eos=False)):
        pass
    return time.perf_counter() - t0


def measure(engine=None, *, device: torch.device | str | None = None, quick: bool = False) -> dict:
    """This machine's figures on `engine`'s device (or `device`), JSON-ready, rates rounded to what holds."""
    copy_mib, n, repeats, steps = SIZES["quick" if quick else "full"]
    device = torch.device(device if device is not None else (engine.device if engine is not None else "cpu"))
    warmup = warm_up(engine) if engine is not None else 0.0
    started = time.perf_counter()
    bandwidth = copy_bandwidth(copy_mib * 2**20, repeats, device)
    flops = matmul_flops(n, repeats, device)
    profile = {
        "device": str(device), "device_name": device_name(device),
        "threads": torch.get_num_threads(), "torch_version": torch.__version__,
        "bandwidth_gbps": round(bandwidth / 1e9, 2), "matmul_gflops": round(flops / 1e9, 1),
        "model": None, "dtype": "float32", "decode_step_ms": None, "decode_bytes_per_step": None,
    }
    if engine is not None:
        step_s, step_bytes = decode_step(engine, steps)
        profile.update(model=engine.name, dtype=engine.dtype_name,
                       decode_step_ms=round(step_s * 1e3, 2), decode_bytes_per_step=int(step_bytes))
    profile["measured_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    profile["duration_s"] = round(time.perf_counter() - started, 2)  # the measurement itself
    profile["warmup_s"] = round(warmup, 2)  # the engine's first decode, which the first run would pay otherwise
    return profile
