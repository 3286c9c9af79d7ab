"""CPU thread count vs matmul time on this (shared, 2-core) machine: one-row GEMV vs small GEMMs.

Run: .venv/bin/python bench/omp_threads.py  — prints the median time of a SmolLM2 gate/up projection
(576 → 3072, fp32) for 1, 4, 16 and 64 rows with 2 threads and with 1 thread, and the ratio. When other
processes keep the cores busy, OpenMP's thread barriers can make every multi-row matmul (prefill, batched
decode) far slower with 2 threads than with 1, while the one-row decode GEMV is unaffected.

It runs twice, in child processes with OMP_WAIT_POLICY=ACTIVE (libgomp spins at barriers) and PASSIVE
(waiting threads sleep), because the policy is fixed when OpenMP loads. Measured here with a load average
of ~1.5: ACTIVE 16 ms for 4 rows with 2 threads (a whole scheduler time slice lost at a barrier) vs 0.6 ms
with PASSIVE — which is why `inference_core` defaults to PASSIVE.
"""
from __future__ import annotations

import statistics
import time

import torch


def median_ms(fn, repeats: int = 30) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    layer = torch.nn.Linear(576, 3072, bias=False)
    rows = (1, 4, 16, 64)
    results = {}
    with torch.inference_mode():
        for threads in (2, 1):
            torch.set_num_threads(threads)
            results[threads] = [median_ms(lambda x=torch.randn(m, 576): layer(x)) for m in rows]
    for i, m in enumerate(rows):
        two, one = results[2][i], results[1][i]
        print(f"rows {m:3d}: 2 threads {two:8.2f} ms   1 thread {one:8.2f} ms   ratio {two / one:6.1f}×")


if __name__ == "__main__":
    import os
    import subprocess
    import sys

    if "OMP_WAIT_POLICY" in os.environ:
        print(f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
        main()
    else:
        for policy in ("ACTIVE", "PASSIVE"):
            subprocess.run([sys.executable, __file__], env={**os.environ, "OMP_WAIT_POLICY": policy}, check=True)
