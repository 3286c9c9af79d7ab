"""`python -m inference_core speculate …`: speculative decoding from a shell, with the plain baseline's speedup."""
from __future__ import annotations

import json
import sys

from ..engine.loaded_model import load_engine
from ..speculative.decode import SpecParams
from ..speculative.speculate import make_draft, plain_timed, run_speculative
from .args import add_generation_args, add_model_arg


def add_speculate(sub) -> None:
    p = sub.add_parser("speculate", help="speculative decoding with a draft (exact: same output distribution)")
    add_model_arg(p)
    p.add_argument("--draft", default="ngram",
                   help="ngram | self-early-exit[:L] | self-int8 | MODEL (a model sharing the tokenizer)")
    p.add_argument("--k", type=int, default=4, help="tokens drafted per round")
    add_generation_args(p)
    p.add_argument("--no-baseline", action="store_true", help="skip timing plain decoding for the speedup")
    p.set_defaults(func=cmd_speculate)


def cmd_speculate(args) -> int:
    engine = load_engine(args.model)
    prompt_ids = engine.encode_prompt(args.prompt, args.chat)
    params = SpecParams(k=args.k, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                        top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    draft = make_draft(engine, args.draft)
    if not args.no_baseline:
        plain_timed(engine, prompt_ids, params)  # warm-up
        base_ids, base_s, _ = plain_timed(engine, prompt_ids, params)
    ids, metrics = run_speculative(engine, prompt_ids, draft, params)
    if not args.no_baseline:
        metrics["plain_time_s"] = base_s
        metrics["speedup"] = base_s / metrics["total_time_s"] if metrics["total_time_s"] else 0.0
        if params.temperature <= 0:
            metrics["identical_to_plain"] = base_ids == ids
    text = engine.tokenizer.decode(ids, skip_special=True)
    if args.json:
        print(json.dumps({"token_ids": ids, "text": text, "draft": draft.name, "metrics": metrics}))
    else:
        print(text)
        by_pos = " ".join("–" if a is None else f"{a:.2f}" for a in metrics["acceptance_by_position"])
        line = (f"\n{draft.name}, k={params.k}: acceptance {metrics['acceptance_rate']:.2f} (by position {by_pos}); "
                f"{metrics['mean_accept_length']:.2f} tokens per target pass; "
                f"{metrics['target_forwards_per_token']:.2f} target passes per token")
        if "speedup" in metrics:
            line += f"; speedup {metrics['speedup']:.2f}× vs plain decoding"
        print(line, file=sys.stderr)
    return 0
