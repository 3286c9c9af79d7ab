"""Decode speed at batch 1: our engine vs transformers on the same weights, and vs the roofline.

    .venv/bin/python bench/decode.py [--tokens 64] [--repeats 3] [--device cuda]

Both engines run greedy in the engine's dtype (fp32 on the CPU, bf16 on CUDA) on the same prompt in this one
process, alternating, so the ratio is robust to a busy machine. On CUDA transformers also runs its best
configuration, a static cache with its forward compiled (generate's auto-compile), and the ratio is taken to that.
On the CPU, llama.cpp's `llama-bench` (F32 GGUF of the same weights, as many threads as ours) runs in the same
rounds when `make bench-peers` has built it; the column is skipped otherwise. The roofline is this machine's
measured streaming-read bandwidth divided by the bytes one decode step must read (all weights + the KV cache so
far).
On CUDA our engine's decode steps replay the bucket-1 paged step graph (captured when the run's pool is lent, so
never inside a timed step); `ours (eager)` shows the same engine without it (INFERENCE_CUDA_GRAPHS=0), i.e. what
per-kernel launch overhead costs at this model size.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import llama_cpp  # noqa: E402
from bench.common import PROMPT, measure_read_bandwidth, ours_decode_tps, settings_override  # noqa: E402
from inference_core.model.config import DEFAULT_MODEL  # noqa: E402
from inference_core import load_engine  # noqa: E402
from inference_core.engine.model_runner import runner_for  # noqa: E402


def hf_decode_tps(model, ids, n_tokens: int, eos: int, static: bool = False) -> float:
    """transformers' generate: time for n+1 tokens minus time for 1 token (the prefill) → decode rate. `static`:
    a static cache, which makes generate compile the forward on a GPU (one compile per length, at the warm-up)."""
    tokens = torch.tensor([ids], device=model.device)
    sync = torch.cuda.synchronize if tokens.is_cuda else (lambda: None)
    cache = {"cache_implementation": "static"} if static else {}

    def run(n):
        t0 = time.perf_counter()
        model.generate(tokens, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=eos, **cache)
        sync()
        return time.perf_counter() - t0

    with torch.inference_mode():
        one = min(run(1) for _ in range(2))
        many = run(n_tokens)
    return (n_tokens - 1) / (many - one)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM

    from inference_core.model.weights import MODELS, gguf_path

    engine = load_engine(DEFAULT_MODEL, device=args.device)
    path = gguf_path(MODELS[DEFAULT_MODEL])
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=engine.dtype)
    hf = hf.to(args.device).eval()
    cuda = args.device.startswith("cuda")
    ids = engine.tokenizer.encode(PROMPT)
    cfg = engine.config
    weight_bytes = cfg.matmul_params() * engine.bytes_per_value

    peer = llama_cpp.llama_bench_path() if not cuda else None
    ours, eager, theirs, theirs_static, kv_read, llama = [], [], [], [], [], []
    ours_decode_tps(engine, ids, 8)  # warm-up both
    hf_decode_tps(hf, ids, 4, cfg.eos_token_id)
    if cuda:  # compiles for both lengths it is timed at
        hf_decode_tps(hf, ids, args.tokens, cfg.eos_token_id, static=True)
    for _ in range(args.repeats):
        tps, kv = ours_decode_tps(engine, ids, args.tokens)
        ours.append(tps)
        kv_read.append(kv)
        if cuda:
            with settings_override(cuda_graphs=False):
                eager.append(ours_decode_tps(engine, ids, args.tokens)[0])
        theirs.append(hf_decode_tps(hf, ids, args.tokens, cfg.eos_token_id))
        if cuda:
            theirs_static.append(hf_decode_tps(hf, ids, args.tokens, cfg.eos_token_id, static=True))
        if peer:
            llama.append(llama_cpp.decode_tps("F32", threads=torch.get_num_threads(), n_gen=args.tokens, repetitions=1))
    bandwidth = measure_read_bandwidth(2**30 if cuda else 512 * 2**20, device=args.device)
    ours_tps, hf_tps = statistics.median(ours), statistics.median(theirs)
    bytes_per_token = weight_bytes + statistics.mean(kv_read)
    roofline_tps = bandwidth * 1e9 / bytes_per_token
    print(f"device               {torch.cuda.get_device_name() if cuda else 'cpu'}, torch {torch.__version__}")
    print(f"threads              {torch.get_num_threads()}")
    print(f"bytes per decode step {bytes_per_token / 1e6:.1f} MB (weights {weight_bytes / 1e6:.1f} MB, "
          f"{engine.dtype_name})")
    print(f"measured bandwidth   {bandwidth:.1f} GB/s  → roofline {roofline_tps:.1f} tok/s")
    print(f"ours                 {ours_tps:.1f} tok/s  ({ours_tps / roofline_tps:.0%} of roofline)  "
          f"[{runner_for(engine.model).kernel}]")
    if eager:
        eager_tps = statistics.median(eager)
        print(f"ours (eager, no graph) {eager_tps:.1f} tok/s  ({eager_tps / roofline_tps:.0%} of roofline)")
    print(f"transformers         {hf_tps:.1f} tok/s  ({hf_tps / roofline_tps:.0%} of roofline)")
    if theirs_static:
        hf_tps = statistics.median(theirs_static)
        print(f"transformers static cache + compile (its best) {hf_tps:.1f} tok/s  ({hf_tps / roofline_tps:.0%} of roofline)")
    print(f"ratio ours/transformers{' (best)' if theirs_static else ''} {ours_tps / hf_tps:.2f}×  "
          f"(medians of {len(ours)} interleaved rounds)")
    if llama:
        llama_tps = statistics.median(llama)
        print(f"llama.cpp F32        {llama_tps:.1f} tok/s  ({llama_tps / roofline_tps:.0%} of roofline)")
        print(f"ratio ours/llama.cpp {ours_tps / llama_tps:.2f}×  (medians of {len(ours)} interleaved rounds)")
    elif not cuda:
        print("llama.cpp            skipped: `make bench-peers` builds llama-bench")


if __name__ == "__main__":
    main()
