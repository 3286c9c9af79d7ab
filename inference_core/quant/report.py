"""`python -m inference_core quantize-report`: bytes, perplexity, KL vs fp32, decode speed, sample text per format."""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from ..engine.loaded_model import GenerationParams, LoadedModel, load_engine, quantized_engine
from ..engine.model_runner import kernels_used, runner_for
from ..engine.paged import pool_bytes_per_token
from ..engine.trace import RunFinished
from ..model.config import DEFAULT_MODEL
from .formats import DEFAULT_FORMATS, parse_format
from .linears import quantized_linears
from .perplexity import compare, heldout_ids, paged_backend
from .quantize import matmul_weight_bytes, resident_bytes

SAMPLE_PROMPT = "The old lighthouse keeper looked out at the sea and"


def decode_speed(engine: LoadedModel, prompt: str = SAMPLE_PROMPT, new_tokens: int = 32,
                 repeats: int = 3) -> tuple[float, str]:
    """(median decode tokens/s over `repeats` greedy runs, the generated text)."""
    speeds, text = [], ""
    params = GenerationParams(max_new_tokens=new_tokens, stop_at_eos=False)
    for _ in range(repeats):
        final = [e for e in engine.generate(prompt, params) if isinstance(e, RunFinished)][0]
        speeds.append(final.tokens_per_s)
        text = final.text
    return statistics.median(speeds), text


KV_INT8 = "fp32+kv-int8"


def report(model_name: str = DEFAULT_MODEL, formats: list[str] | tuple[str, ...] = DEFAULT_FORMATS,
           max_tokens: int | None = None, window: int = 512, new_tokens: int = 32, repeats: int = 3,
           log=None, kv_int8: bool = False) -> list[dict]:
    """One row per format; with `kv_int8`, one more row: the model's weights over an int8 KV pool, with the
    decode path its pages took (counted by the runner, not assumed) and its cached tokens per pool byte."""
    base = load_engine(model_name)
    cfg = base.config
    fmts = [parse_format(f) for f in formats]
    engines = {f.name: base if f.kind == "fp32" else quantized_engine(base, f) for f in fmts}
    labels = {f.name: f.label for f in fmts}
    backends = {}
    if kv_int8:
        engines[KV_INT8] = LoadedModel(f"{base.name}:kv-int8", base.model, base.tokenizer, base.device, kv_dtype="int8")
        labels[KV_INT8] = f"{base.dtype_name} weights, int8 KV pool (fp16 scale per token and head)"
        backends[KV_INT8] = paged_backend(base.model, "int8")
    ids = heldout_ids(base.tokenizer, max_tokens)
    t0 = time.perf_counter()
    quality = compare({name: e.model for name, e in engines.items()}, base.model, ids, window, backends=backends)
    if log:
        log(f"quality of {len(engines)} formats on {len(ids)} tokens: {time.perf_counter() - t0:.0f} s")
    own_kv = pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, base.dtype)
    rows = []
    for name, engine in engines.items():
        model, runner = engine.model, runner_for(engine.model)
        before = dict(runner.path_counts)
        speed, text = decode_speed(engine, new_tokens=new_tokens, repeats=repeats)
        row = {
            "format": name, "label": labels[name], "kernels": kernels_used(model),
            "matmul_weight_bytes": matmul_weight_bytes(model), "resident_bytes": resident_bytes(model),
            "kv_bytes_per_token": cfg.kv_bytes_per_token(base.bytes_per_value),
            **quality[name].to_dict(), "decode_tokens_per_s": speed, "sample": text,
        }
        if name == KV_INT8:
            row["kernels"] = sorted(p for p, n in runner.path_counts.items() if n > before.get(p, 0))
            row["kv_bytes_per_token"] = pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, base.dtype,
                                                             "int8")
            row["kv_capacity_vs_model_dtype"] = own_kv / row["kv_bytes_per_token"]
        elif parse_format(name).kind == "llm-int8":  # the most outlier columns any call saw, per projection
            row["outlier_dims"] = {proj: max(m.outlier_counts, default=0)
                                   for proj, m in quantized_linears(model).items()}
        rows.append(row)
        if log:
            log(f"{name}: {speed:.1f} tok/s")
    return rows


def add_quantize_report(sub) -> None:
    p = sub.add_parser("quantize-report", help="bytes, perplexity, KL vs fp32 and decode speed per format")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model name (default: {DEFAULT_MODEL})")
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS),
                   help="comma-separated: fp32,int8,w8a8,int4-g32,int4-g64,int4-g128,nf4,fp8,llm-int8")
    p.add_argument("--max-tokens", type=int, default=None, help="score only the first N held-out tokens")
    p.add_argument("--window", type=int, default=512, help="tokens per perplexity window")
    p.add_argument("--new-tokens", type=int, default=32, help="greedy tokens per speed run")
    p.add_argument("--kv-int8", action="store_true",
                   help="add a row: the model's weights over an int8 KV pool (quality, decode speed, capacity)")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=cmd_quantize_report)


def cmd_quantize_report(args) -> int:
    formats = [f for f in args.formats.split(",") if f.strip()]  # checked before anything loads (cli/args.py)
    rows = report(args.model, formats, args.max_tokens, args.window, args.new_tokens,
                  log=lambda s: print(s, file=sys.stderr, flush=True), kv_int8=args.kv_int8)
    if args.json:
        # What a recorded copy (inference_core/data/quant_measured.json) must say: the command, date and device.
        from datetime import datetime, timezone

        from ..model.loader import device_name, pick_device

        dev = pick_device()
        where = f"{device_name(dev)} CPU, {torch.get_num_threads()} threads" if dev.type == "cpu" else device_name(dev)
        print(json.dumps({"model": args.model, "threads": torch.get_num_threads(),
                          "command": "python -m inference_core " + " ".join(sys.argv[1:]),
                          "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                          "device": f"{where}, torch {torch.__version__}", "rows": rows}, indent=1))
        return 0
    print(f"{'format':<13} {'MiB':>7} {'ppl':>8} {'KL':>8} {'top1':>6} {'tok/s':>7} {'KV B/tok':>8}  kernel")
    for r in rows:
        print(f"{r['format']:<13} {r['matmul_weight_bytes'] / 2**20:7.1f} {r['perplexity']:8.3f} "
              f"{r['kl_vs_fp32']:8.4f} {r['top1_agreement']:6.3f} {r['decode_tokens_per_s']:7.1f} "
              f"{r['kv_bytes_per_token']:8d}  {','.join(r['kernels'])}")
    for r in rows:
        if "kv_capacity_vs_model_dtype" in r:
            print(f"\n{r['format']}: {r['kv_capacity_vs_model_dtype']:.2f}x the cached tokens per pool byte")
    for r in rows:
        print(f"\n[{r['format']}] {SAMPLE_PROMPT}{r['sample']}")
    return 0
