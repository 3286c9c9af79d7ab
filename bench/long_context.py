#!/usr/bin/env python3
"""The long-context demo's run time with its defaults (issue 41: under about 20 s on 2 cores), and what each of its
measurements costs beside the full cache's, as ratios.

    .venv/bin/python bench/long_context.py [--threads 2] [--rounds 3] [--context 512] [--json out.json]

Each round runs the demo's runner end to end (demos/catalog/long_context.py, defaults unless --context) and times
every `eviction_point` as it arrives: the full cache's forward, then each (policy, budget). Reported: the median
(min, max) of the whole run over the rounds, and per policy the median time of one point divided by the full
cache's point of the same round (recent and sinks only change a mask: near 1; H2O adds its token-by-token choice
in Python per layer, more at small budgets, which evict more often). Run it on a quiet machine: on a shared box
other tenants' load makes every figure noisy. No database, Redis or worker: the engine only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def one_round(models, params: dict) -> tuple[float, dict[tuple[str, int], float]]:
    from demos.catalog import long_context

    start = last = time.perf_counter()
    points = {}
    for ev in long_context.run(params, models=models):
        now = time.perf_counter()
        if ev["type"] == "eviction_point":
            points[(ev["policy"], ev["budget"])] = now - last
        last = now
    return time.perf_counter() - start, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--context", type=int, default=None, help="the demo's window (default: its spec's)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from demos.catalog.long_context import SPEC
    from workers.serving import LoadedModels

    params = SPEC.with_defaults({} if args.context is None else {"context": args.context})
    models = LoadedModels()
    models.get()
    one_round(models, {**params, "context": 128})  # warm-up: first-call allocations, not measured
    totals, ratios = [], {}
    for _ in range(args.rounds):
        total, points = one_round(models, params)
        totals.append(total)
        full = points[("full", params["context"])]
        for (policy, budget), seconds in points.items():
            if policy != "full":
                ratios.setdefault(policy, []).append(seconds / full)
    report = {
        "cpu": cpu_model(), "threads": args.threads, "rounds": args.rounds, "params": params,
        "run_s": {"median": statistics.median(totals), "min": min(totals), "max": max(totals)},
        "point_over_full": {p: round(statistics.median(r), 3) for p, r in ratios.items()},
        "goal_s": 20.0,
    }
    print(f"{report['cpu']}, {args.threads} threads: the demo's run with {params}: median "
          f"{report['run_s']['median']:.1f} s (min {report['run_s']['min']:.1f}, max {report['run_s']['max']:.1f}); "
          f"goal under {report['goal_s']:.0f} s")
    for policy, ratio in report["point_over_full"].items():
        print(f"  one {policy} point / the full cache's point: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
