"""Batching benchmark: paged continuous batching vs transformers, KV waste, prefix-cache TTFT (one process).

Run:  .venv/bin/python bench/batching.py            (BENCH_THREADS=1 by default, see below)
      BENCH_QUICK=1 .venv/bin/python bench/batching.py   (smaller workload, skips transformers' generate_batch)
      BENCH_AMX=1 .venv/bin/python bench/batching.py     (c=32 with fp32 and AMX bf16 long steps vs transformers
                                                          fp32 and bf16, interleaved rounds; see amx_rounds)

Figures from `.venv/bin/python bench/batching.py` (2026-11-25, three runs) on the shared 2-core CPU, fp32,
SmolLM2-135M, one intra-op thread on both sides, durations in process CPU seconds:
  fp32 matmul ceiling: 28.5 GFLOP/s at 1 row, 77.3 at 32 rows → a token gets at most 2.7× cheaper by batching
  ours, mixed requests (17-85 prompt, 8-40 new tokens), c concurrent: c=32 107.0 / 104.6 / 100.5 output tok/s in
    three runs (mean TPOT 98-99 ms)   [the run's 1,714-token first step on oneDNN's GEMM, the next weight panel
    streamed during batch linears, vector SiLU: before them 96.5 / 94.5 / 93.5; before the fused step 59.0]
  transformers sequential generate: 16.9 / 16.2 / 16.4 tok/s (8/8 outputs token-identical) → ours c=32 6.3×,
    6.5×, 6.1× (median 6.3×; goal 6×). The workload is compute-bound at one thread: its first step prefills all
    32 prompts (1,714 tokens, two thirds of the tokens), ~4.5 s of the ~7.2 s, work transformers does too
  transformers generate_batch (its continuous batching, runs on CPU), 32 × 24 tokens: 16.8 / 16.5 / 16.6 tok/s;
    ours 122.6 / 116.5 / 98.7 → 7.3× / 7.1× / 5.9× (32/32 outputs identical)
  KV waste, same c=32 run: paged block 16 9.9% (block 8 4.9%, block 4 2.2%); contiguous prompt+max_new 17.4%,
    contiguous 8192 positions 99.2%. Longer requests (prompt 100-1000, output 50-500): paged block 16 1.1%,
    contiguous prompt+max_new 19.7%   [goal ≤ 4% paged: met for realistic lengths; short requests pay up to
    one partial block each]
  prefix cache, 1,319-token shared prefix: TTFT 4,078-4,129 ms uncached → 123-129 ms cached (1,312 tokens hit),
    32.5× / 33.4× / 31.9× lower   [goal ≥ 10×]

Figures from a KVM "Intel(R) Xeon(R) Processor" (family 6 model 167, 2 cores, AVX-512 with AMX bf16/int8),
2026-11-27, one thread, CPU time, shared with other sessions (load average 3.9-5.8):
  `bench/batching.py` before the AMX paths, one run: ours c=32 101.1 out tok/s, transformers sequential 15.3 → 6.6×
  `BENCH_AMX=1 bench/batching.py`, medians of 3 interleaved rounds: ours c=32 fp32 99.5, ours c=32 with AMX bf16 long
    steps (INFERENCE_LONG_STEP_PRECISION=bf16: the 1,714-token first step's linears in bf16, decode fp32) 127.6;
    transformers sequential fp32 13.5, bf16 13.4 → fp32 7.4× (8/8 outputs identical to transformers fp32), AMX bf16
    long steps 9.5× either peer (8/8 identical to transformers fp32, 6/8 to transformers bf16)   [goal ≥ 8× on an
    AMX box: met with the bf16 precision choice; the fp32 default stays token-identical and reaches 7.4×]
"""
from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core.model.config import DEFAULT_MODEL  # noqa: E402

from inference_core import load_engine  # noqa: E402
from inference_core.engine.llm_engine import drive  # noqa: E402
from inference_core.model.sampling import SamplingParams  # noqa: E402
from inference_core.engine.scheduler import Request, SchedulerConfig  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "1"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")  # BENCH_DEVICE=cuda: both sides on the GPU, wall clock
# Every CPU duration is process CPU time (one intra-op thread on both sides): the shared 2-core machine runs
# other jobs, and CPU seconds count only the work this process did. BENCH_CLOCK=wall switches to wall time.
# GPU work is not process CPU time, so on CUDA the clock is always the wall (each step ends in a sync).
CLOCK = time.perf_counter if os.environ.get("BENCH_CLOCK") == "wall" or DEVICE != "cpu" else time.process_time
QUICK = bool(os.environ.get("BENCH_QUICK"))
# The prefix-cache TTFT's shared document: 1.3K tokens on the CPU (its figures below), 4K on a GPU (issue 13's goal)
PREFIX_TOKENS = int(os.environ.get("BENCH_PREFIX_TOKENS", "1320" if DEVICE == "cpu" else "4096"))
torch.set_num_threads(THREADS)

TOPICS = ["the history of the printing press", "how bridges carry load", "why the sky is blue", "the water cycle",
          "how vaccines train the immune system", "the rules of chess", "photosynthesis in plants",
          "how a compiler works", "the causes of the French Revolution", "how batteries store energy"]


def workload(n: int, seed: int = 0, uniform_out: int | None = None) -> list[tuple[str, int]]:
    """Mixed prompts (≈10-70 tokens) and output lengths (8-40 tokens)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        extra = " Please be precise, give an example, and keep it short." * rng.randint(0, 5)
        prompt = f"Question {i}: explain {topic} to a curious student.{extra}\nAnswer:"
        out.append((prompt, uniform_out or rng.randint(8, 40)))
    return out


def ours(engine, jobs, concurrency: int, **cfg) -> tuple[dict, list[list[int]], object]:
    reqs = [Request(f"r{i}", engine.tokenizer.encode(p), SamplingParams(max_new_tokens=n, stop_at_eos=False))
            for i, (p, n) in enumerate(jobs)]
    config = SchedulerConfig(max_num_seqs=concurrency, num_blocks=cfg.pop("num_blocks", 512), **cfg)
    sched, _ = drive(engine, reqs, config, trace=False, clock=CLOCK)
    return sched.run_metrics(), [r.output_ids for r in reqs], sched


def load_hf(dtype: torch.dtype):
    from transformers import AutoModelForCausalLM

    from inference_core.model.weights import MODELS, gguf_path

    path = gguf_path(MODELS[DEFAULT_MODEL])
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                dtype=dtype).to(DEVICE).eval()


def hf_sequential(hf, engine, jobs) -> tuple[float, list[list[int]]]:
    """transformers `generate`, one request at a time (greedy, exactly n new tokens). Returns tok/s, outputs."""
    import copy

    toks, secs, outs = 0, 0.0, []
    for prompt, n in jobs:
        ids = torch.tensor([engine.tokenizer.encode(prompt)], device=DEVICE)
        # Generate through EOS like our scheduler (stop_at_eos=False). min_new_tokens would ban EOS and change
        # the greedy path, and eos_token_id=None falls back to the model's EOS, so the stop id is moved to the
        # last vocabulary entry (a rare word piece); tokens are counted as generated, and compared below.
        gc = copy.deepcopy(hf.generation_config)
        gc.update(max_new_tokens=n, min_new_tokens=None, do_sample=False, eos_token_id=engine.config.vocab_size - 1,
                  pad_token_id=0)
        t0 = CLOCK()
        with torch.inference_mode():
            o = hf.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
            o = o.cpu()  # waits for the GPU
        secs += CLOCK() - t0
        outs.append(o[0, ids.shape[1]:].tolist())
        toks += len(outs[-1])
    return toks / secs, outs


def hf_generate_batch(hf, engine, jobs) -> tuple[float, list[list[int]]]:
    from transformers import GenerationConfig

    inputs = [engine.tokenizer.encode(p) for p, _ in jobs]
    n = jobs[0][1]
    gc = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=-1, pad_token_id=0)
    t0 = CLOCK()
    out = hf.generate_batch(inputs=inputs, generation_config=gc, progress_bar=False)
    dt = CLOCK() - t0
    ordered = [out[k].generated_tokens for k in sorted(out, key=lambda k: int(k.split("_")[-1]))]
    return sum(len(o) for o in ordered) / dt, ordered


def waste_for_block_size(step_lengths: list[list[int]], bs: int) -> float:
    """Allocated-but-unfilled slots / allocated slots over the same schedule, had blocks been `bs` tokens."""
    alloc = sum(math.ceil(n / bs) * bs for lens in step_lengths for n in lens)
    filled = sum(n for lens in step_lengths for n in lens)
    return 100 * (alloc - filled) / alloc


def long_workload_waste(n: int = 64, seed: int = 0) -> dict:
    """KV waste for longer, chat-like requests (prompts 100–1000 tokens, outputs 50–500).

    Block allocation depends only on sequence lengths (stop_at_eos is off), so the same scheduler and
    allocator are driven by a tiny random-weight model: identical block tables, seconds instead of hours.
    """
    from inference_core.engine.loaded_model import LoadedModel
    from inference_core.model.config import ModelConfig
    from inference_core.model.loader import build_model

    cfg = ModelConfig(vocab_size=97, dim=64, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=128, max_seq_len=2048)
    tiny = LoadedModel("tiny", build_model(cfg, None, torch.device("cpu")), None, torch.device("cpu"))
    rng = random.Random(seed)
    reqs = [Request(f"r{i}", [rng.randrange(3, 97) for _ in range(rng.randint(100, 1000))], SamplingParams(max_new_tokens=rng.randint(50, 500), stop_at_eos=False)) for i in range(n)]
    sched, _ = drive(tiny, reqs, SchedulerConfig(block_size=16, num_blocks=4096, max_num_seqs=32), trace=False)
    m = sched.run_metrics()
    lengths = [s["lengths"] for s in sched.step_stats]
    return {"paged16": m["kv_waste_pct"], "paged32": waste_for_block_size(lengths, 32),
            "request_max": m["contiguous_request_max_waste_pct"]}


def prefix_ttft(engine, prefix_tokens: int, reps: int = 1) -> dict:
    """TTFT of a question after a shared document of about `prefix_tokens` tokens, with and without the prefix
    cache."""
    section = "Section {}: the library opens at nine, closes at five, and lends books for three weeks."
    per_section = len(engine.tokenizer.encode(" ".join(section.format(i) for i in range(10, 20)))) / 10
    doc = " ".join(section.format(i) for i in range(max(1, round(prefix_tokens / per_section))))
    system = f"You answer questions about this document.\n{doc}\n"
    prefix_len = len(engine.tokenizer.encode(system))
    first = Request("warm", engine.tokenizer.encode(system + "Q: When does the library open? A:"), SamplingParams(max_new_tokens=2))
    q = system + "Q: How long can I keep a book? A:"
    num_blocks = 2 * (-(-len(first.prompt_ids) // 16)) + 16  # both requests' blocks, none evicted
    res = {"prefix_tokens": prefix_len}
    for cached in (False, True):
        ttfts = []
        for rep in range(reps):
            reqs = [Request("q", engine.tokenizer.encode(q), SamplingParams(max_new_tokens=2))]
            arrivals = {"q": 0}
            if cached:  # a previous request with the same document has filled the cache
                reqs.insert(0, Request("warm", list(first.prompt_ids), SamplingParams(max_new_tokens=2)))
                arrivals = {"warm": 0, "q": 2}
            sched, _ = drive(engine, reqs, SchedulerConfig(block_size=16, num_blocks=num_blocks, prefix_caching=cached),
                             arrival_steps=arrivals, trace=False, clock=CLOCK)
            r = sched.requests["q"]
            ttfts.append(r.token_times[0] - r.arrival_time)
            res[f"cached_tokens_{cached}"] = r.num_cached_tokens
        res[f"ttft_s_{'cached' if cached else 'uncached'}"] = statistics.median(ttfts)
    return res


def gemm_ceiling(engine) -> dict:
    """How much cheaper a token gets when rows share one weight read: GFLOP/s (in the weights' dtype) of the model's largest
    projection (w_gate_up) at 1 and 32 rows. On a GPU the gap is ~two orders of magnitude; on this CPU it is
    a few ×, which caps what batching can gain here."""
    w = engine.model.layers[0].feed_forward.w_gate_up.weight
    sync = torch.cuda.synchronize if w.is_cuda else (lambda: None)
    out = {}
    for m in (1, 32):
        x = torch.randn(m, w.shape[1], device=w.device, dtype=w.dtype)
        for _ in range(5):
            torch.nn.functional.linear(x, w)
        sync()
        t0, n = CLOCK(), 40
        for _ in range(n):
            torch.nn.functional.linear(x, w)
        sync()
        out[m] = 2 * m * w.numel() * n / (CLOCK() - t0) / 1e9
    return out


def amx_rounds(engine, rounds: int) -> None:
    """BENCH_AMX=1: ours at c=32 with fp32 long steps (the default) and with AMX bf16 long steps
    (INFERENCE_LONG_STEP_PRECISION=bf16: the 1,714-token first step's linears in bf16, decode steps fp32) against
    transformers' sequential generate in fp32 and in bf16 (the fair peer of a bf16 side), interleaved per round."""
    from inference_core.kernels import onednn_linears

    jobs, n_seq = workload(32), 8
    hf = {"fp32": load_hf(torch.float32), "bf16": load_hf(torch.bfloat16)}
    ours(engine, workload(2, seed=9, uniform_out=3), 2)  # warm-up
    tps = {k: [] for k in ("ours fp32", "ours AMX bf16 long steps", "transformers fp32", "transformers bf16")}
    outs = {}
    print(f"AMX bf16 {onednn_linears.amx('bf16')} ({'amx_bf16' in onednn_linears.cpu_flags()} in the CPU's flags)")
    for r in range(rounds):
        for precision, key in (("fp32", "ours fp32"), ("bf16", "ours AMX bf16 long steps")):
            os.environ["INFERENCE_LONG_STEP_PRECISION"] = precision
            m, outs[key], sched = ours(engine, jobs, 32)
            tps[key].append(m["output_throughput"])
        os.environ.pop("INFERENCE_LONG_STEP_PRECISION")
        for dtype in ("fp32", "bf16"):
            t, outs[f"transformers {dtype}"] = hf_sequential(hf[dtype], engine, jobs[:n_seq])
            tps[f"transformers {dtype}"].append(t)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in tps.items())
              + f" out tok/s (load average {os.getloadavg()[0]:.2f})", flush=True)
    med = {k: statistics.median(v) for k, v in tps.items()}
    print(f"\nmedians of {rounds} interleaved rounds (out tok/s): " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    for side in ("ours fp32", "ours AMX bf16 long steps"):
        for peer in ("transformers fp32", "transformers bf16"):
            same = sum(a == b for a, b in zip(outs[side][:n_seq], outs[peer]))
            print(f"  {side} c=32 / {peer} sequential = {med[side] / med[peer]:.1f}×  ({same}/{n_seq} outputs identical)")


def main() -> None:
    engine = load_engine(DEFAULT_MODEL, device=DEVICE)
    if os.environ.get("BENCH_AMX"):
        return amx_rounds(engine, int(os.environ.get("BENCH_ROUNDS", "3")))
    print(f"device {DEVICE}, torch threads {torch.get_num_threads()}, quick={QUICK}, clock={CLOCK.__name__}", flush=True)
    g = gemm_ceiling(engine)
    print(f"{engine.dtype_name} matmul ceiling (w_gate_up {tuple(engine.model.layers[0].feed_forward.w_gate_up.weight.shape)}): "
          f"{g[1]:.1f} GFLOP/s at 1 row, {g[32]:.1f} at 32 rows → batching makes a token at most "
          f"{g[32] / g[1]:.1f}× cheaper here", flush=True)
    # 64 on a GPU: issue 13's second batching goal (the step graphs' largest bucket)
    levels = [1, 4, 16] if QUICK else [1, 4, 16, 32] + ([64] if DEVICE != "cpu" else [])
    jobs = workload(max(levels))
    ours(engine, workload(2, seed=9, uniform_out=3), 2)  # warm-up
    results = {}
    for c in levels:
        m, outs, sched = ours(engine, jobs[:c], c)
        results[c] = (m, outs, sched)
        print(f"ours  c={c:>2}: {m['output_throughput']:6.2f} out tok/s  ({m['total_output_tokens']} tokens in "
              f"{m['duration_s']:.1f} s, mean TTFT {m['mean_ttft_ms']:.0f} ms, mean TPOT {m['mean_tpot_ms']:.0f} ms)",
              flush=True)

    m32, outs32, sched32 = results[max(levels)]
    lengths = [s["lengths"] for s in sched32.step_stats]
    print(f"\nKV waste over the c={max(levels)} run (allocated-but-unfilled / allocated, mean over steps):")
    print(f"  paged, block 16: {m32['kv_waste_pct']:.1f}%   (recomputed from lengths: {waste_for_block_size(lengths, 16):.1f}%)")
    for bs in (1, 4, 8, 32):
        print(f"  paged, block {bs:>2}: {waste_for_block_size(lengths, bs):.1f}%")
    print(f"  contiguous, reserve prompt+max_new_tokens: {m32['contiguous_request_max_waste_pct']:.1f}%")
    print(f"  contiguous, reserve the model's {engine.config.max_seq_len} positions: "
          f"{m32['contiguous_model_max_waste_pct']:.1f}%", flush=True)

    lw = long_workload_waste()
    print(f"  longer requests (64 × prompt 100–1000, output 50–500 tokens, 32 at a time): paged block 16 "
          f"{lw['paged16']:.1f}%, block 32 {lw['paged32']:.1f}%; contiguous prompt+max_new {lw['request_max']:.1f}%",
          flush=True)

    p = prefix_ttft(engine, PREFIX_TOKENS)
    print(f"\nprefix cache: {p['prefix_tokens']}-token shared prefix; TTFT uncached {p['ttft_s_uncached'] * 1000:.0f} ms, "
          f"cached {p['ttft_s_cached'] * 1000:.0f} ms ({p['cached_tokens_True']} tokens hit) → "
          f"{p['ttft_s_uncached'] / p['ttft_s_cached']:.1f}× lower", flush=True)

    hf = load_hf(engine.dtype)
    n_seq = 4 if QUICK else 8
    seq_tps, seq_outs = hf_sequential(hf, engine, jobs[:n_seq])
    same = sum(a == b for a, b in zip(seq_outs, results[max(levels)][1][:n_seq]))
    print(f"\ntransformers sequential generate: {seq_tps:.2f} out tok/s (measured on {n_seq} requests; "
          f"{same}/{n_seq} outputs token-identical to ours)")
    singles = [ours(engine, [job], 1)[1][0] for job in jobs[:n_seq]]
    same = sum(a == b for a, b in zip(singles, results[max(levels)][1][:n_seq]))
    print(f"ours c={max(levels)} vs the same requests run alone: {same}/{n_seq} outputs token-identical")
    for c in levels:
        print(f"  ours c={c:>2} / sequential transformers = {results[c][0]['output_throughput'] / seq_tps:.1f}×")
    if not QUICK:
        ujobs = workload(32, seed=1, uniform_out=24)
        try:
            gb_tps, gb_outs = hf_generate_batch(hf, engine, ujobs)
            mu, uouts, _ = ours(engine, ujobs, 32)
            same = sum(a == b for a, b in zip(gb_outs, uouts))
            print(f"\ntransformers generate_batch (32 requests × 24 tokens): {gb_tps:.2f} out tok/s; ours "
                  f"{mu['output_throughput']:.2f} → {mu['output_throughput'] / gb_tps:.2f}× "
                  f"({same}/32 outputs identical)")
        except Exception as exc:  # noqa: BLE001 — report why, keep the rest of the numbers
            print(f"\ntransformers generate_batch failed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
