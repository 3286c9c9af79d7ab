#!/usr/bin/env python3
"""Model parallelism's cost on this machine (issue 41, module 6): time per decode step of the course model split
across 2 processes (demos/catalog/tensor_parallel.py: tensor parallel, or pipeline) beside the engine in one process
on the same prompt, side by side, as ratios, with the communication's share of the split steps.

    .venv/bin/python bench/tensor_parallel.py [--rounds 3] [--tokens 24] [--split tensor|pipeline|both]
        [--json out.json]

Each round runs every side once, alternating which goes first. Reported per side: the median (min, max) over the
rounds of the median decode step (a split step is its slower rank's compute + communication), the ratio to one
process, the all-reduce (or send) seconds' share of the split steps, the collectives a step, whether every token was
one process's, and the backend and CPU model. Process start-up is not in the step times. Run it on a quiet machine:
on a shared box other tenants' load makes every side noisy, and the split sides need 2 free cores. No database,
Redis or worker: the engine and the two ranks only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

PROMPT = "The history of the printing press begins"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def one_process(engine, tokens: int) -> dict:
    from inference_core import GenerationParams
    from inference_core.engine.trace import TokenStep

    params = GenerationParams(max_new_tokens=tokens, temperature=0.0, stop_at_eos=False)
    steps = [e for e in engine.generate(PROMPT, params) if isinstance(e, TokenStep)]
    return {"step_s": statistics.median(s.step_time_s for s in steps if s.phase == "decode"),
            "tokens": [s.token_id for s in steps]}


def split_run(models, split: str, tokens: int) -> dict:
    from demos.catalog import tensor_parallel as tp

    events = list(tp.run({"prompt": PROMPT, "max_new_tokens": tokens, "split": split}, models=models))
    decode = [e for e in events if e["type"] == "parallel_step" and e["step"] > 0]
    walls = [max(r["compute_s"] + r["comm_s"] for r in e["ranks"]) for e in decode]
    comm = sum(r["comm_s"] for e in decode for r in e["ranks"])
    total = sum(r["comm_s"] + r["compute_s"] for e in decode for r in e["ranks"])
    return {"step_s": statistics.median(walls), "comm_share": comm / total, "backend": events[0]["backend"],
            "collectives": decode[0]["ranks"][0]["collectives"], "identical": events[-1]["identical"],
            "tokens": [e["token_id"] for e in events if e["type"] == "parallel_step"]}


def spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--split", choices=("tensor", "pipeline", "both"), default="both")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import django

    django.setup()
    from workers.serving import LoadedModels

    models = LoadedModels()
    engine = models.get()
    splits = ("tensor", "pipeline") if args.split == "both" else (args.split,)
    sides = ("one process",) + splits
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for round_ in range(args.rounds):
        order = sides if round_ % 2 == 0 else tuple(reversed(sides))
        for side in order:
            results[side].append(one_process(engine, args.tokens) if side == "one process"
                                 else split_run(models, side, args.tokens))
    alone = spread([r["step_s"] for r in results["one process"]])
    report = {"cpu": cpu_model(), "prompt": PROMPT, "tokens": args.tokens, "rounds": args.rounds,
              "one_process_step_s": alone}
    print(f"{cpu_model()}: median decode step over {args.rounds} rounds, {args.tokens} tokens")
    low, high = 1000 * alone["min"], 1000 * alone["max"]
    print(f"  one process        {1000 * alone['median']:7.2f} ms  (min {low:.2f}, max {high:.2f})")
    for split in splits:
        rows = results[split]
        step = spread([r["step_s"] for r in rows])
        report[split] = {"step_s": step, "ratio_to_one_process": step["median"] / alone["median"],
                         "comm_share": statistics.median(r["comm_share"] for r in rows),
                         "collectives_per_step": rows[0]["collectives"], "backend": rows[0]["backend"],
                         "identical": all(r["identical"] for r in rows)}
        r = report[split]
        print(f"  {split:<8} 2 ranks  {1000 * step['median']:7.2f} ms  "
              f"×{r['ratio_to_one_process']:.2f} of one process, "
              f"communication {100 * r['comm_share']:.0f}% ({r['collectives_per_step']} a step, {r['backend']}), "
              f"tokens identical: {r['identical']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
