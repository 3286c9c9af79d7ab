#!/usr/bin/env python3
"""What the grammar's token mask costs a step (issue 41, structured output): the same batch of requests decoded
plain (the engine's own sampler) and constrained (demos/constrained.py's GrammarChooser: llguidance's mask, the
logits masked, then the same sampler), side by side, as a ratio; then valid replies over `--runs` seeded runs of each.

    .venv/bin/python bench/structured_output.py [--rounds 5] [--batch 1,8] [--tokens 32] [--runs 100]
                                                [--schema scientist] [--json out.json]

Each round runs both sides once per batch size, alternating which goes first, on the same prompt, seeds and
temperature (0.8). Reported per batch size and side: the median (min, max) seconds per engine step over the rounds
(a step's wall time from its `batch_step` event: the forward pass and every request's choice), the ratio
constrained / plain, and the mask's own share (its computation inside the chooser, median microseconds per token).
The validity count is the demo's own (every reply checked with `json.loads` and the schema): the issue's goal is
100/100 with the mask. Run it on a quiet machine: on a shared box other tenants' load makes both sides noisy.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")


class Models:
    """The demo runner's `models`: this process's one engine."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def get(self, name=None, device=None):
        return self.engine


def one_batch(engine, schema: str, batch: int, tokens: int, constrained: bool) -> tuple[list[float], list[float]]:
    """(seconds per engine step after the prefill, mask microseconds per token) of one batch run."""
    from demos.catalog import structured_output as so
    from demos.constrained import GrammarChooser
    from inference_core import GenerationParams
    from inference_core.engine.llm_engine import drive
    from inference_core.engine.paged_trace import BatchStep
    from inference_core.engine.request import Request
    from inference_core.engine.scheduler import SchedulerConfig

    kind, source = so.grammar_source(schema)
    prompt = engine.encode_prompt(so.PROMPTS[schema], chat=True)
    requests, choosers = [], []
    for i in range(batch):
        gen = GenerationParams(max_new_tokens=tokens, temperature=0.8, seed=i, chat=True)
        chooser = GrammarChooser(engine, kind, source, len(prompt)) if constrained else None
        choosers += [chooser] if chooser else []
        requests.append(Request(f"r{i}", list(prompt), gen, generator=gen.generator(), chooser=chooser))
    blocks = batch * -(-(len(prompt) + tokens) // 16)
    _, events = drive(engine, requests, SchedulerConfig(num_blocks=blocks, max_num_seqs=batch), trace=True)
    # the decode steps while every request still runs (a grammar may end its replies sooner): the prefill apart
    full = min(len(r.output_ids) for r in requests)
    steps = [e.duration_s for e in events if isinstance(e, BatchStep)][1:full]
    return steps, [r["mask_us"] for c in choosers for r in c.records]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", default="1,8", help="batch sizes, comma-separated")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per request (the grammar may end a reply sooner)")
    ap.add_argument("--runs", type=int, default=100, help="seeded runs of each for the validity count (0: skip)")
    ap.add_argument("--schema", default="scientist")
    ap.add_argument("--json", help="write the report here too")
    args = ap.parse_args()

    import django

    django.setup()
    from demos.catalog import structured_output as so
    from inference_core import DEFAULT_MODEL
    from inference_core.engine.loaded_model import load_engine

    engine = load_engine(DEFAULT_MODEL)
    report = {"machine": platform.processor() or platform.machine(), "schema": args.schema, "rounds": args.rounds,
              "tokens": args.tokens, "batches": {}}
    for batch in (int(b) for b in args.batch.split(",")):
        one_batch(engine, args.schema, batch, 4, True)  # warm-up: the tokenizer's llguidance view, the pools
        sides = {"plain": [], "constrained": []}
        masks: list[float] = []
        for r in range(args.rounds):
            for side in (("plain", "constrained") if r % 2 == 0 else ("constrained", "plain")):
                steps, mask_us = one_batch(engine, args.schema, batch, args.tokens, side == "constrained")
                sides[side].append(statistics.median(steps))
                masks += mask_us
        row = {side: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v)} for side, v in sides.items()}
        row["ratio"] = row["constrained"]["median_s"] / row["plain"]["median_s"]
        row["mask_us_median"] = statistics.median(masks) if masks else None
        report["batches"][batch] = row
        print(f"batch {batch:>3}: step plain {row['plain']['median_s'] * 1e3:.2f} ms "
              f"({row['plain']['min_s'] * 1e3:.2f}–{row['plain']['max_s'] * 1e3:.2f}), constrained "
              f"{row['constrained']['median_s'] * 1e3:.2f} ms ({row['constrained']['min_s'] * 1e3:.2f}–"
              f"{row['constrained']['max_s'] * 1e3:.2f}); ratio {row['ratio']:.3f}; mask "
              f"{row['mask_us_median']:.0f} µs per token")
    if args.runs:
        params = so.SPEC.with_defaults({"schema": args.schema, "prompt": so.PROMPTS[args.schema], "runs": args.runs,
                                        "temperature": 1.0})
        summary = [e for e in so.run(params, models=Models(engine)) if e["type"] == "validity_summary"][-1]
        report["validity"] = summary
        print(f"valid over {args.runs} seeded runs at temperature 1: constrained {summary['valid']['constrained']}, "
              f"unconstrained {summary['valid']['unconstrained']}")
    print(f"machine: {report['machine']} (run on a quiet machine for figures to quote)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
