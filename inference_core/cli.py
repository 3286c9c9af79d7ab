"""`python -m inference_core generate …`: the engine from a shell, JSON out for scripts and tests."""
from __future__ import annotations

import argparse
import json
import sys

from .engine import GenerationParams, load_engine
from .trace import RunFinished


def add_model_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m", help="model name (default: smollm2-135m)")


def add_generation_args(parser: argparse.ArgumentParser) -> None:
    """--prompt, --max-new-tokens and the sampling options, shared by every generating sub-command."""
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="generate text from a prompt")
    add_model_arg(p)
    add_generation_args(p)
    p.add_argument("--no-cache", action="store_true", help="recompute every position each step")
    p.add_argument("--chat", action="store_true", help="apply the model's chat template")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quant", default=None, help="weight format: int8, w8a8, int4-g128, nf4, fp8, llm-int8, …")
    p.set_defaults(func=cmd_generate)


def cmd_generate(args) -> int:
    engine = load_engine(args.model)
    params = GenerationParams(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        seed=args.seed, use_cache=not args.no_cache, chat=args.chat,
    )
    if getattr(args, "quant", None):
        from .quant import quantized_engine

        engine = quantized_engine(engine, args.quant)  # a quantized copy: the cached engine stays fp32
    final = None
    for event in engine.generate(args.prompt, params):
        if isinstance(event, RunFinished):
            final = event
        elif not args.json and event.type == "token":
            print(event.text, end="", flush=True)
    assert final is not None
    if args.json:
        print(json.dumps({
            "token_ids": final.token_ids, "text": final.text, "finish_reason": final.finish_reason,
            "metrics": {"ttft_s": final.ttft_s, "tpot_s": final.tpot_s, "tokens_per_s": final.tokens_per_s,
                        "kv_bytes": final.kv_bytes, "n_prompt_tokens": final.n_prompt_tokens},
        }))
    else:
        print(f"\n\nTTFT {final.ttft_s * 1000:.1f} ms · TPOT {final.tpot_s * 1000:.1f} ms · "
              f"{final.tokens_per_s:.1f} tok/s · KV {final.kv_bytes / 1024:.0f} KiB", file=sys.stderr)
    return 0


# Each feature module contributes one sub-command: (module, function that adds its parser).
SUBCOMMANDS: list[tuple[str, str]] = [
    ("inference_core.cli", "add_generate"),
    ("inference_core.quant_report", "add_quantize_report"),
    ("inference_core.speculative", "add_speculate"),
    ("inference_core.scheduler", "add_batch"),
]


def main(argv: list[str] | None = None) -> int:
    import importlib

    parser = argparse.ArgumentParser(prog="python -m inference_core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module, func in SUBCOMMANDS:
        getattr(importlib.import_module(module), func)(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        parser.exit(2, f"error: {exc}\n")
