"""Decode speed and KV capacity at batch 1: the model's own KV dtype against the int8 KV pool.

    .venv/bin/python bench/kv_int8.py [--tokens 64] [--rounds 5] [--contexts 0,1024] [--device cuda]

The same engine decodes greedy with `kv_dtype="auto"` (fp32 pages on the CPU, bf16 on CUDA) and `kv_dtype="int8"`
after each prompt of `--contexts` (0: the short prompt below as it is; N: that prompt's tokens repeated to N, so
every decode step attends over ≥ N cached positions), alternating within each round so a busy machine slows both
alike; the figure is the median over rounds of decode tokens/s from the trace's own step times. The path each ran is
the runner's own count (on the CPU the fused C++ step reads both kinds of pages; int8 ones are named "(int8 KV)").
Capacity is bytes per cached token from the pool (int8 values + an fp16 scale per token and head).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core import GenerationParams, load_engine  # noqa: E402
from inference_core.engine.loaded_model import LoadedModel  # noqa: E402
from inference_core.engine.model_runner import runner_for  # noqa: E402
from inference_core.engine.paged import pool_bytes_per_token  # noqa: E402
from inference_core.engine.trace import TokenStep  # noqa: E402
from inference_core.model.config import DEFAULT_MODEL  # noqa: E402
from inference_core.model.loader import device_name  # noqa: E402

PROMPT = "Write a short story about a robot who learns to paint. Once upon a time"
KV_DTYPES = ("auto", "int8")


def decode_tps(engine: LoadedModel, ids: list[int], n_tokens: int) -> float:
    steps = [e for e in engine.generate_events(ids, GenerationParams(max_new_tokens=n_tokens, stop_at_eos=False))
             if isinstance(e, TokenStep)][1:]  # decode steps only
    return len(steps) / sum(s.step_time_s for s in steps)


def prompt_of(ids: list[int], n: int) -> list[int]:
    """The prompt's tokens repeated to n tokens (0: as they are)."""
    return ids if n <= 0 else (ids * -(-n // len(ids)))[:n]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--contexts", default="0,1024", help="comma-separated prompt lengths (0: the short prompt)")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    base = load_engine(args.model, device=args.device)
    engines = {kv: LoadedModel(base.name, base.model, base.tokenizer, base.device, kv_dtype=kv) for kv in KV_DTYPES}
    short = base.encode_prompt(PROMPT, chat=False)
    prompts = {n: prompt_of(short, n) for n in (int(c) for c in args.contexts.split(","))}
    runner = runner_for(base.model)
    for engine in engines.values():  # warm-up: kernels built, pools lent once
        for ids in prompts.values():
            decode_tps(engine, ids, 4)
    speeds: dict[tuple[int, str], list[float]] = {(n, kv): [] for n in prompts for kv in KV_DTYPES}
    paths: dict[str, set[str]] = {kv: set() for kv in KV_DTYPES}
    for _ in range(args.rounds):
        for n, ids in prompts.items():
            for kv, engine in engines.items():
                before = runner.path_counts.copy()
                speeds[n, kv].append(decode_tps(engine, ids, args.tokens))
                paths[kv] |= {path for path, c in runner.path_counts.items() if c > before[path]}
    cfg = base.config
    where = device_name(base.device) + (f", {torch.get_num_threads()} threads" if base.device.type == "cpu" else "")
    print(f"{args.model} on {where}, torch {torch.__version__}: {args.tokens} new tokens per run, "
          f"median of {args.rounds} interleaved rounds")
    own = pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, base.dtype)
    for kv in KV_DTYPES:
        per_token = pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, base.dtype, kv)
        name = base.dtype_name if kv == "auto" else "int8"
        print(f"  {name:>8} KV: {per_token:6d} B/token ({own / per_token:.2f}x tokens per byte)  "
              f"paths: {'; '.join(sorted(paths[kv]))}")
    for n, ids in prompts.items():
        fast = {kv: statistics.median(speeds[n, kv]) for kv in KV_DTYPES}
        print(f"  {len(ids):5d}-token prompt: " + "  ".join(
            f"{base.dtype_name if kv == 'auto' else 'int8'} KV {fast[kv]:6.1f} tok/s" for kv in KV_DTYPES)
            + f"  int8/{base.dtype_name} {fast['int8'] / fast['auto']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
