"""`python -m inference_core batch`: a file of prompts served by the batching scheduler (LLMEngine.step())."""
from __future__ import annotations

import json

from ..engine.llm_engine import drive
from ..engine.loaded_model import load_engine
from ..engine.scheduler import Request, SchedulerConfig, request_metrics
from ..model.sampling import SamplingParams
from .args import add_model_arg


def read_prompts(path: str, jsonl: bool = False) -> list[dict]:
    """One request per non-blank line. Text (default): the line is the prompt, `\\n` for a newline.
    JSON lines (`jsonl`): each line an object {"prompt", "max_new_tokens"?, "arrival_step"?, "id"?}."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if not jsonl:
                out.append({"prompt": line.replace("\\n", "\n")})
                continue
            try:
                spec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {number}: not JSON ({exc.msg})") from None
            if not isinstance(spec, dict) or not isinstance(spec.get("prompt"), str):
                raise ValueError(f"{path} line {number}: needs an object with a \"prompt\" string")
            out.append(spec)
    return out


def add_batch(sub) -> None:
    p = sub.add_parser("batch", help="serve a file of prompts with the batching scheduler")
    add_model_arg(p)
    p.add_argument("--prompts-file", required=True,
                   help="one prompt per line; JSON lines with --jsonl or a .jsonl file")
    p.add_argument("--jsonl", action="store_true",
                   help='read the file as JSON lines: {"prompt", "max_new_tokens"?, "arrival_step"?, "id"?}')
    p.add_argument("--mode", choices=["continuous", "static"], default="continuous",
                   help="continuous: schedule every step; static: a batch runs until its slowest member is done")
    p.add_argument("--block-size", type=int, default=16, help="tokens per KV-cache block (default: 16)")
    p.add_argument("--num-blocks", type=int, default=256, help="KV-cache blocks in the pool (default: 256)")
    p.add_argument("--max-num-seqs", type=int, default=32, help="sequences in one batch at most (default: 32)")
    p.add_argument("--max-num-batched-tokens", type=int, default=4096,
                   help="tokens in one forward pass at most (default: 4096)")
    p.add_argument("--prefix-cache", action="store_true",
                   help="reuse the KV blocks of prompt prefixes already computed")
    p.add_argument("--max-new-tokens", type=int, default=32, help="default for lines that do not set it")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 = greedy (default)")
    p.add_argument("--seed", type=int, default=None, help="request i samples with seed + i")
    p.add_argument("--chat", action="store_true", help="apply the model's chat template")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_batch)


def cmd_batch(args) -> int:
    import sys

    engine = load_engine(args.model)
    config = SchedulerConfig(mode=args.mode, block_size=args.block_size, num_blocks=args.num_blocks,
                             max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                             prefix_caching=args.prefix_cache)
    specs = read_prompts(args.prompts_file, jsonl=args.jsonl or args.prompts_file.endswith(".jsonl"))
    if not specs:
        raise ValueError(f"no prompts in {args.prompts_file}")
    reqs, arrivals = [], {}
    for i, spec in enumerate(specs):
        rid = str(spec.get("id", f"r{i}"))
        ids = engine.encode_prompt(spec["prompt"], args.chat)
        params = SamplingParams(temperature=args.temperature, seed=None if args.seed is None else args.seed + i,
                                max_new_tokens=int(spec.get("max_new_tokens", args.max_new_tokens)))
        reqs.append(Request(rid, ids, params))
        arrivals[rid] = int(spec.get("arrival_step", 0))
    sched, _ = drive(engine, reqs, config, arrival_steps=arrivals, trace=False)
    results = []
    for spec, req in zip(specs, reqs):
        m = request_metrics(req)
        results.append({"id": req.request_id, "prompt": spec["prompt"], "prompt_token_ids": req.prompt_ids,
                        "token_ids": req.output_ids, "text": engine.tokenizer.decode(req.output_ids, skip_special=True),
                        "finish_reason": req.finish_reason, "n_cached_tokens": req.num_cached_tokens,
                        "num_preemptions": req.num_preemptions,
                        **{k: v for k, v in m.items() if k != "itl_s"}})
    metrics = sched.run_metrics()
    if args.json:
        print(json.dumps({"config": config.__dict__, "requests": results, "metrics": metrics}))
    else:
        for r in results:
            print(f"[{r['id']}] {r['prompt']!r} → {r['text']!r}")
        print(f"\n{metrics['completed']} requests in {metrics['duration_s']:.2f} s · "
              f"{metrics['output_throughput']:.1f} output tok/s · TTFT mean {metrics['mean_ttft_ms']:.0f} ms · "
              f"KV waste {metrics['kv_waste_pct']:.1f}% · preemptions {metrics['num_preemptions']}", file=sys.stderr)
    return 0
