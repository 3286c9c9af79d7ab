"""Speculative decoding vs plain decoding on the same prompts, per draft kind and k policy (greedy, exact).

    .venv/bin/python bench/speculative.py [--tokens 48] [--repeats 3] [--threads N] [--quick]
    .venv/bin/python bench/speculative.py --model qwen2.5-coder-1.5b-instruct --draft qwen2.5-coder-0.5b-instruct
        (after `make models-qwen`: a target with a separate draft model, on every workload)

Workloads: copy (quote a paragraph), code-edit, free text (three prompts). A draft is KIND@K (k fixed), KIND@aK
(k up to K following the acceptance: speculative/adaptive.py's AdaptiveK) or KIND@cK (k up to K, cost-aware: its
CostAwareK). One process; per workload, each repeat runs plain decoding and then every draft in turn, their order
rotating (interleaved), and the medians give the speedup (end-to-end, prefill included on both sides) by two clocks:
wall time, and this process's CPU time (with --threads 1 the CPU time is what an idle machine's wall time would be,
and it is far less disturbed by other processes on a shared machine), and the decode phase's speedup (`decode×`:
wall time after the prompt's prefill on both sides; the speculative side's includes its first token, so it is the
conservative figure); `prefill s` is plain decoding's prefill (median), the part both sides share. Every speculative
output is checked token for token against plain greedy decoding. Also prints the cost of one target forward over
1, 2, 3, 5, 9, 17 positions (what a verify pass costs relative to a decode step on this CPU: CostAwareK's
`RoundCost`) and the load average at the start and the end.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core.model.config import DEFAULT_MODEL  # noqa: E402

from inference_core import load_engine  # noqa: E402
from inference_core.engine.model_runner import runner_for  # noqa: E402
from inference_core.speculative.decode import SpecParams  # noqa: E402
from inference_core.speculative.speculate import make_draft, plain_timed, run_speculative

CODE = '''def moving_average(values, window):
    """Average of each run of `window` consecutive values."""
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    for i in range(len(values) - window + 1):
        chunk = values[i:i + window]
        out.append(sum(chunk) / window)
    return out
'''
QUOTE = ("The KV cache stores the keys and values of every past token, so each decode step only computes "
         "attention for the newest token. Its size grows linearly with the context: two tensors per layer, "
         "one vector per key-value head per token. Grouped-query attention shares each key-value head among "
         "several query heads, which divides the cache by that group size.")

WORKLOADS = {
    # (chat?, prompt): the instruct model copies most of the input back, which an n-gram draft predicts
    "code-edit": (True, f"Rename the function moving_average to rolling_mean and keep everything else the "
                        f"same. Return only the code.\n\n```python\n{CODE}```"),
    "copy": (True, f"Repeat the following paragraph word for word, then summarize it in one sentence.\n\n{QUOTE}"),
    "free-text": (True, "Write a short story about a lighthouse keeper who finds a message in a bottle."),
    "free-sky": (True, "Explain why the sky is blue in two sentences."),
    "free-poem": (True, "Write a short poem about autumn."),
}
NGRAM = "ngram@4,ngram@a16,ngram@c16"
DRAFTS = {  # KIND@K: k fixed; KIND@aK: following the acceptance, up to K; KIND@cK: cost-aware, up to K
    "copy": NGRAM, "free-text": NGRAM, "free-sky": NGRAM, "free-poem": NGRAM,
    "code-edit": NGRAM + ",self-early-exit:20@3,self-early-exit:20@a16,self-early-exit:20@c16",
}
QUICK = NGRAM
POLICIES = {"a": "acceptance", "c": "cost"}


def parse_drafts(spec: str) -> list[tuple[str, str, int, str]]:
    """'ngram@4,ngram@a16,ngram@c16' → [(kind, label, k, policy)], policy '' (fixed), 'acceptance' or 'cost'."""
    out = []
    for d in filter(None, spec.split(",")):
        kind, _, k = d.rpartition("@")
        policy = POLICIES.get(k[:1], "")
        out.append((kind, k, int(k[1:] if policy else k), policy))
    return out


def cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def verify_cost(engine, context: int = 200, repeats: int = 7) -> dict[int, tuple[float, float]]:
    """(wall ms, CPU ms), medians, of one target forward over T new positions with `context` tokens cached."""
    runner = runner_for(engine.model)  # the path the engine's verify takes (the fused step on the CPU)
    ids = list(range(1000, 1000 + context + 17))
    seq = runner.new_sequence(context + 24)
    sync = torch.cuda.synchronize if engine.device.type == "cuda" else (lambda: None)
    out = {}
    with torch.inference_mode():
        runner.forward_sequence(ids[:context], seq)
        for t in (1, 2, 3, 5, 9, 17):
            wall, cpu = [], []
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                runner.forward_sequence(ids[context:context + t], seq, all_rows=True)
                sync()
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                seq.truncate(context)
            out[t] = (1000 * statistics.median(wall), 1000 * statistics.median(cpu))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (plain decoding then runs as a CUDA graph)")
    ap.add_argument("--quick", action="store_true", help="code-edit and free-text only, n-gram drafts only")
    ap.add_argument("--workloads", default="", help="comma-separated subset of " + ",".join(WORKLOADS))
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"the target model (default {DEFAULT_MODEL})")
    ap.add_argument("--draft", default="", help="a draft model's name (or kind) to run at k = 2, 4, 6 on every "
                    "workload instead of the default draft list")
    ap.add_argument("--drafts", default="", help="override the draft list: comma-separated KIND@K (fixed), "
                    "KIND@aK (following the acceptance) or KIND@cK (cost-aware), e.g. ngram@4,ngram@a16,ngram@c16")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = load_engine(args.model, device=args.device)
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{cpu_model()}, torch {torch.__version__}, {torch.get_num_threads()} threads, {engine.name} {engine.dtype} on {args.device}, "
          f"{args.tokens} new tokens, median of {args.repeats}")
    costs = verify_cost(engine)
    print("target forward over T positions, wall ms (× T=1): " +
          ", ".join(f"T={t}: {w:.1f} ({w / costs[1][0]:.2f}×)" for t, (w, _) in costs.items()))
    print("                               CPU ms (× T=1): " +
          ", ".join(f"T={t}: {c:.1f} ({c / costs[1][1]:.2f}×)" for t, (_, c) in costs.items()))
    names = [w for w in (args.workloads.split(",") if args.workloads else WORKLOADS) if w]
    if args.quick and not args.workloads:
        names = ["code-edit", "free-text"]
    print(f"\n{'workload':<10} {'draft':<19} {'k':>3} {'prefill s':>9} {'plain s':>8} {'spec s':>8} {'speedup':>7} {'cpu×':>6} {'decode×':>7} {'accept':>6} "
          f"{'tok/pass':>8} {'pass/tok':>8} {'draft/verify':>12} {'same':>5}  acceptance by position")
    for wname in names:
        chat, prompt = WORKLOADS[wname]
        ids = engine.encode_prompt(prompt, chat)
        params = SpecParams(max_new_tokens=args.tokens, stop_at_eos=False)
        ref, _, _ = plain_timed(engine, ids, params)  # warm-up and the reference output
        chosen = parse_drafts(args.drafts or (",".join(f"{args.draft}@{k}" for k in (2, 4, 6)) if args.draft else "")
                              or (QUICK if args.quick else DRAFTS[wname]))
        runs = []
        for kind, label, k, policy in chosen:
            try:
                draft = make_draft(engine, kind)
            except ValueError as exc:
                print(f"{wname:<10} {kind:<19} {label:>3} skipped: {exc}")
                continue
            sp = SpecParams(k=k, adaptive=bool(policy), policy=policy or "cost", max_new_tokens=args.tokens,
                            stop_at_eos=False)
            run_speculative(engine, ids, draft, sp)  # warm-up (e.g. the int8 kernels, the draft's cache)
            runs.append(dict(kind=kind, label=label, draft=draft, sp=sp, wall=[], cpu=[], decode=[], same=True, m={}))
        plain_wall, plain_cpu, plain_decode = [], [], []
        for rep in range(args.repeats):  # plain, then every draft, the drafts' order rotating: interleaved
            c0 = time.process_time()
            _, t_plain, t_prefill = plain_timed(engine, ids, params)
            plain_cpu.append(time.process_time() - c0)
            plain_wall.append(t_plain)
            plain_decode.append(t_plain - t_prefill)
            for r in runs[rep % len(runs):] + runs[:rep % len(runs)]:
                c0, t0 = time.process_time(), time.perf_counter()
                out, r["m"] = run_speculative(engine, ids, r["draft"], r["sp"])
                r["wall"].append(time.perf_counter() - t0)
                r["cpu"].append(time.process_time() - c0)
                r["decode"].append(r["m"]["total_time_s"] - r["m"]["prefill_time_s"])
                r["same"] = r["same"] and out == ref
        med = statistics.median
        p, prefill = med(plain_wall), med(w - d for w, d in zip(plain_wall, plain_decode))
        for r in runs:
            m, s = r["m"], med(r["wall"])
            cpu, decode = med(plain_cpu) / med(r["cpu"]), med(plain_decode) / med(r["decode"])
            by_pos = " ".join("-" if a is None else f"{a:.2f}" for a in m["acceptance_by_position"])
            print(f"{wname:<10} {r['kind']:<19} {r['label']:>3} {prefill:>9.3f} {p:>8.2f} {s:>8.2f} {p / s:>6.2f}× {cpu:>5.2f}× "
                  f"{decode:>6.2f}× {m['acceptance_rate']:>6.2f} {m['mean_accept_length']:>8.2f} "
                  f"{m['target_forwards_per_token']:>8.2f} {m['draft_cost_ratio']:>12.2f} "
                  f"{'yes' if r['same'] else 'NO':>5}  {by_pos}", flush=True)
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
