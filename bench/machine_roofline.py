"""Measure this machine's roofline: memory bandwidth (large tensor copy) and fp32 matmul FLOP/s.

Run: .venv/bin/python bench/machine_roofline.py  — prints medians of repeated runs and the JSON props the
roofline calculator takes (`machine`). The machine is shared, so treat the figures as what it achieved then.
"""
from __future__ import annotations

import json
import statistics
import time

import torch


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up: page faults, thread pool start
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(n_bytes: int = 256 * 2**20, repeats: int = 7) -> float:
    """Bytes/s of dst.copy_(src): each copy reads n_bytes and writes n_bytes."""
    src = torch.ones(n_bytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    return 2 * n_bytes / median_time(lambda: dst.copy_(src), repeats)


def matmul_flops(n: int = 1024, repeats: int = 7) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / median_time(lambda: a @ b, repeats)


def main() -> None:
    bw = copy_bandwidth()
    fl = matmul_flops()
    print(f"threads {torch.get_num_threads()}  copy bandwidth {bw / 1e9:.2f} GB/s  fp32 matmul {fl / 1e9:.1f} GFLOP/s  "
          f"ridge point {fl / bw:.1f} FLOP/byte")
    print(json.dumps({"machine": {"label": "This course server (CPU, fp32)", "bandwidth_gbps": round(bw / 1e9, 2),
                                  "peak_gflops": round(fl / 1e9, 1)}}))


if __name__ == "__main__":
    main()
