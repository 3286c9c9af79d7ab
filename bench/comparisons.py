"""How often the comparison demos' clocks agree with their lessons, on an idle worker and beside concurrent runs.

Runs every comparison demo (demos/catalog: kv-cache, prefix-caching, batching, speculative, flash-attention,
quantization, serving-load) at its defaults through its runner, `--runs` times with the process otherwise idle, then as many
times beside `--load` concurrent students: threads that generate through the worker's batching service without
pause, as kv-cache runs with the cache do (so the kv-cache demo's own generation shares their forward passes).
For each run it reads the `comparison` event: does the faster median match the lesson's claim, are the two spreads
apart or "within noise", and are the counters the same as in every other run of that demo (they must be).

Not CI: the figures depend on the machine and on whatever else it runs. Report them with the CPU model.

    python bench/comparisons.py --runs 5 --load 8 [--demos kv-cache,batching] [--json out.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

COMPARISON_DEMOS = ("kv-cache", "prefix-caching", "batching", "speculative", "flash-attention", "quantization",
                    "serving-load")
LOAD_PROMPTS = ("Once upon a time, in a small village by the sea,", "The three primary colours are",
                "To make a simple tomato sauce, first", "Water boils at")


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


class Load:
    """`n` threads generating through the batching service until stopped: other students' runs."""

    def __init__(self, n: int, models, model: str) -> None:
        from inference_core import GenerationParams

        self.stop = threading.Event()
        self.tokens = 0
        service = models.service(model)

        def loop(i: int) -> None:
            gen = GenerationParams(max_new_tokens=24, temperature=0.0, stop_at_eos=False)
            while not self.stop.is_set():
                for ev in service.generate(LOAD_PROMPTS[i % len(LOAD_PROMPTS)], gen, self.stop.is_set):
                    if ev.type == "token":
                        self.tokens += 1

        self.threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n)]

    def __enter__(self) -> "Load":
        for t in self.threads:
            t.start()
        time.sleep(1.0)  # let the service's batch fill
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def one_run(name: str, models) -> dict:
    from demos.catalog import DEMOS

    t0 = time.perf_counter()
    events = list(DEMOS[name].load_runner()({}, models=models))
    comp = next(e for e in events if e["type"] == "comparison")
    return {"wall_s": time.perf_counter() - t0, "claim": comp["claim"], "faster": comp["faster"],
            "within_noise": comp["within_noise"], "other_sequences": comp["other_sequences"],
            "cpu_load_1m": comp["cpu_load_1m"],
            "medians_ms": {s["label"]: round(1000 * s["median_s"], 2) for s in comp["sides"]},
            "spreads_ms": {s["label"]: [round(1000 * s["low_s"], 2), round(1000 * s["high_s"], 2)]
                           for s in comp["sides"]},
            "counters": {s["label"]: s["counters"] for s in comp["sides"]}}


def tally(name: str, runs: list[dict]) -> dict:
    claimed = [r for r in runs if r["claim"]]
    return {
        "demo": name, "runs": len(runs), "claim": runs[0]["claim"] if runs else "",
        "direction_matches": sum(r["faster"] == r["claim"] for r in claimed),
        "apart_and_matching": sum(r["faster"] == r["claim"] and not r["within_noise"] for r in claimed),
        "within_noise": sum(r["within_noise"] for r in runs),
        "counters_hold": all(r["counters"] == runs[0]["counters"] for r in runs),
        "max_other_sequences": max((r["other_sequences"] for r in runs), default=0),
        "medians_ms": [r["medians_ms"] for r in runs],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5, help="runs per demo and condition")
    p.add_argument("--load", type=int, default=8, help="concurrent generating threads in the loaded condition")
    p.add_argument("--demos", default=",".join(COMPARISON_DEMOS))
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    args = p.parse_args(argv)

    import django

    django.setup()
    from inference_core.model.config import DEFAULT_MODEL
    from workers.serving import LoadedModels

    import torch

    demos = [d for d in args.demos.split(",") if d]
    models = LoadedModels()  # this run's models: loaded once, as a worker keeps them
    models.get(DEFAULT_MODEL)
    for name in demos:  # warm-up: kernels, the quantized copy, first-touch allocations
        one_run(name, models)
    results: dict[str, list[dict]] = {}
    for condition, n_load in (("idle", 0), (f"beside {args.load} concurrent runs", args.load)):
        rows = []
        with Load(n_load, models, DEFAULT_MODEL) if n_load else contextlib.nullcontext():
            for name in demos:
                runs = [one_run(name, models) for _ in range(args.runs)]
                rows.append(tally(name, runs))
        results[condition] = rows
    report = {"cpu": cpu_model(), "torch_threads": torch.get_num_threads(), "runs": args.runs,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": results}
    print(f"CPU: {report['cpu']}; torch threads: {report['torch_threads']}; {report['date']}")
    for condition, rows in results.items():
        print(f"\n{condition} ({args.runs} runs per demo): the lesson's direction (median of the repeats) / "
              "apart and matching / within noise / counters the same every run")
        for r in rows:
            print(f"  {r['demo']:16} claim {r['claim']!r:26} direction {r['direction_matches']}/{r['runs']}  apart "
                  f"{r['apart_and_matching']}/{r['runs']}  within noise {r['within_noise']}/{r['runs']}  counters "
                  f"{'hold' if r['counters_hold'] else 'DIFFER'}  other sequences ≤ {r['max_other_sequences']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
