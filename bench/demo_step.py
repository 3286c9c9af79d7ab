"""Does a live demo decode as fast as the benchmark says? The KV-cache demo's runner vs bench/decode.py's timing.

    .venv/bin/python bench/demo_step.py [--tokens 48] [--rounds 5]

Both run in this one process on the same engine, alternating round by round:
  * bench: `bench/decode.py`'s measurement (a one-request schedule through `LLMEngine.step()`, decode steps
    timed by the trace's own step times);
  * demo: the KV-cache demo's runner exactly as the worker calls it (`demos/catalog/kv_cache.py` with the
    cache on: the batching service, a thread around the same `step()`), timed as the worker sees it: wall
    time between consecutive token events reaching the caller, which adds the service's queue hand-off.
Per-step decode time is the mean over a run's decode steps (as bench/decode.py reports it); the script prints
the median over rounds and the demo/bench ratio (goal: within 10%).

Figures (2026-11-25, the 2-core EPYC, fp32, fused CPU step, `--rounds 7`): bench 13.91 ms/step, demo 14.34 ms
between token events as received (14.12 ms traced); demo/bench per round 1.020× (within 10%).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

import django  # noqa: E402

django.setup()

from bench.common import PROMPT, ours_decode_tps  # noqa: E402
from demos.catalog import kv_cache  # noqa: E402
from inference_core.model.config import DEFAULT_MODEL  # noqa: E402
from inference_core.engine.model_runner import runner_for  # noqa: E402
from workers.serving import LoadedModels  # noqa: E402


def bench_step_ms(engine, ids: list[int], n: int) -> float:
    """bench/decode.py's own measurement, as ms per decode step."""
    return 1000 / ours_decode_tps(engine, ids, n)[0]


def demo_step_ms(models: LoadedModels, n: int) -> tuple[float, float]:
    """(mean wall ms between decode token events as the worker receives them, mean traced step ms)."""
    events = kv_cache.run({"prompt": PROMPT, "max_new_tokens": n, "use_cache": True, "temperature": 0.0},
                          models=models)
    arrivals, traced = [], []
    try:
        for ev in events:
            if ev["type"] == "token":
                arrivals.append(time.perf_counter())
                traced.append(ev["step_time_s"])
    finally:
        events.close()
    gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:])]  # decode steps only (the first is the prefill)
    return 1000 * statistics.fmean(gaps), 1000 * statistics.fmean(traced[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    models = LoadedModels()  # as a worker keeps its model: the bench's side and the demo's share it
    engine = models.get(DEFAULT_MODEL)
    ids = engine.tokenizer.encode(PROMPT)
    print(f"{DEFAULT_MODEL} on {engine.device} ({runner_for(engine.model).kernel}), {args.tokens} new tokens, "
          f"{args.rounds} interleaved rounds", flush=True)
    bench_step_ms(engine, ids, 8)  # warm-up both paths (kernel build, service thread start)
    demo_step_ms(models, 8)
    bench, demo_wall, demo_traced = [], [], []
    for r in range(args.rounds):
        bench.append(bench_step_ms(engine, ids, args.tokens))
        wall, traced = demo_step_ms(models, args.tokens)
        demo_wall.append(wall)
        demo_traced.append(traced)
        print(f"round {r + 1}: bench {bench[-1]:.2f} ms/step; demo {wall:.2f} ms between token events "
              f"({traced:.2f} ms traced step)", flush=True)
    b, w, t = (statistics.median(x) for x in (bench, demo_wall, demo_traced))
    ratio = statistics.median(d / s for d, s in zip(demo_wall, bench))  # per round: both saw the same load
    verdict = "within 10%" if abs(ratio - 1) <= 0.10 else "NOT within 10%"
    print(f"median: bench {b:.2f} ms/step, demo {w:.2f} ms/step as received ({t:.2f} traced); demo/bench per round "
          f"{ratio:.3f}× ({verdict})")


if __name__ == "__main__":
    main()
