"""Naive vs tiled (online-softmax) attention on this CPU: time, score memory held, agreement.

Run: .venv/bin/python bench/flash_attention.py  — SmolLM2's attention shape (9 query heads, 3 KV heads,
head_dim 64, fp32, causal) on random q/k/v at growing N; one thread (see bench/omp_threads.py for why).
Prints medians of 3 runs and the ratios. Memory is the point: the naive version holds heads × N² scores, the
tiled one a tile. Time depends on N: for short sequences the per-tile Python overhead makes the tiled loop
slower; for longer ones it wins even on a CPU (fully masked causal tiles are skipped, the working set stays
in cache, no N² temporaries are allocated).
"""
from __future__ import annotations

import statistics
import time

import torch

from demos.catalog.tiled_attention import naive_attention, tiled_attention


def median_s(fn, repeats: int = 3):
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    print(f"{'N':>6} {'naive ms':>9} {'tiled ms':>9} {'naive/tiled':>11} {'scores held':>12} {'tile held':>10} {'ratio':>8} {'max diff':>9}")
    with torch.inference_mode():
        for n in (128, 256, 512, 1024, 2048):
            q = torch.randn(1, 9, n, 64, generator=g)
            k = torch.randn(1, 3, n, 64, generator=g)
            v = torch.randn(1, 3, n, 64, generator=g)
            (naive, score_bytes), t_naive = median_s(lambda: naive_attention(q, k, v))
            (tiled, stats), t_tiled = median_s(lambda: tiled_attention(q, k, v, block_q=64, block_k=64))
            diff = float((naive - tiled).abs().max())
            print(f"{n:6d} {1000 * t_naive:9.1f} {1000 * t_tiled:9.1f} {t_naive / t_tiled:11.2f} "
                  f"{score_bytes / 2**20:9.1f} MiB {stats.tile_bytes / 2**10:6.0f} KiB "
                  f"{score_bytes / stats.tile_bytes:7.0f}× {diff:9.1e}")


if __name__ == "__main__":
    main()
