"""`python -m inference_core generate …`: one prompt through the engine, the kernels that ran, JSON for scripts."""
from __future__ import annotations

import json
import sys

from ..engine.loaded_model import GenerationParams, load_engine, quantized_engine
from ..engine.model_runner import kernels_used, runner_for
from ..engine.trace import RunFinished
from .args import add_generation_args, add_model_arg


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="generate text from a prompt")
    add_model_arg(p)
    add_generation_args(p)
    p.add_argument("--no-cache", action="store_true", help="recompute every position each step")
    p.add_argument("--quant", default=None, help="weight format: int8, w8a8, int4-g128, nf4, fp8, llm-int8, …")
    p.set_defaults(func=cmd_generate)


def cmd_generate(args) -> int:
    engine = load_engine(args.model)
    params = GenerationParams(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        seed=args.seed, use_cache=not args.no_cache, chat=args.chat,
    )
    if args.quant:
        if not args.json:
            print(f"Quantizing to {args.quant} (the first use on this machine also compiles the AVX2 kernels, "
                  "which can take a minute)…", file=sys.stderr, flush=True)
        engine = quantized_engine(engine, args.quant)  # a quantized copy: the cached engine stays fp32
    runner = runner_for(engine.model)
    before = runner.path_counts.copy()
    final = None
    for event in engine.generate(args.prompt, params):
        if isinstance(event, RunFinished):
            final = event
        elif not args.json and event.type == "token":
            print(event.text, end="", flush=True)
    assert final is not None
    # what this run's forwards took (a step of > 32 new positions, e.g. a long no-cache step, may fall back)
    taken = runner.path_counts - before
    kernels = sorted(taken) if taken else kernels_used(engine.model)
    if "torch reference" in kernels and runner.fused is None:  # name the reference's layers, as kernels_used does
        kernels = kernels_used(engine.model)
    if args.json:
        print(json.dumps({
            "token_ids": final.token_ids, "text": final.text, "finish_reason": final.finish_reason,
            "metrics": {"ttft_s": final.ttft_s, "tpot_s": final.tpot_s, "tokens_per_s": final.tokens_per_s,
                        "kv_bytes": final.kv_bytes, "n_prompt_tokens": final.n_prompt_tokens},
            "kernels": kernels}))
    else:
        print(f"\n\nTTFT {final.ttft_s * 1000:.1f} ms · TPOT {final.tpot_s * 1000:.1f} ms · {final.tokens_per_s:.1f} "
              f"tok/s · KV {final.kv_bytes / 1024:.0f} KiB · kernel {', '.join(kernels)}", file=sys.stderr)
    return 0
