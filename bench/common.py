"""Helpers shared by the benchmarks: the machine's memory-bandwidth roofline and robust timing."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


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
