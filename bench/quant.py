"""Decode speed per weight format at batch 1, side by side in one process.

    .venv/bin/python bench/quant.py [--threads 2] [--tokens 32] [--rounds 5] [--formats ...] [--no-hf]
    .venv/bin/python bench/quant.py --model speed-llama-3.2-1b --formats fp32,int8,int4-g128 --tokens 16

`--model speed-llama-3.2-1b` runs the same rounds on Llama 3.2 1B's shape with seeded random weights (speed only:
5 GB of fp32 weights per step, where a format's bytes set the pace); no peers or per-layer table then.

Rounds are interleaved (fp32, int8, …, then int8, …, fp32: the order rotates each round) so load from other
processes, and the spinning threads a PyTorch-run format leaves behind, hit every format alike. On a shared CPU
a run is only ever slowed down by other jobs, never sped up, so the headline figure is the best round
(max tokens/s, min µs); the median is printed beside it. Also times each layer shape
alone (one linear, batch 1), which isolates the kernels from the Python overhead of a decode step.
Ratios are against our fp32. With `make bench-peers` built, llama.cpp's `llama-bench` decodes the file type of
the same width in the same rounds (fp32 vs F32, int8 vs Q8_0, int4-g128 vs Q4_1), and the ratio of medians is
printed; without it the column is skipped with a note.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import llama_cpp  # noqa: E402
from inference_core.model.config import DEFAULT_MODEL  # noqa: E402
from inference_core import load_engine  # noqa: E402
from inference_core.engine.loaded_model import GenerationParams, LoadedModel  # noqa: E402
from inference_core.quant.linears import quantize_linear  # noqa: E402
from inference_core.quant.quantize import matmul_weight_bytes, quantize_model
from inference_core.engine.model_runner import runner_for  # noqa: E402
from inference_core.model.speed_models import SPEED_ONLY_MODELS  # noqa: E402
from inference_core.engine.trace import RunFinished  # noqa: E402

PROMPT = "The old lighthouse keeper looked out at the sea and"


def ours(engine: LoadedModel, tokens: int) -> float:
    params = GenerationParams(max_new_tokens=tokens, stop_at_eos=False)
    return [e for e in engine.generate(PROMPT, params) if isinstance(e, RunFinished)][0].tokens_per_s


def hf_decode(model, ids: list[int], tokens: int) -> float:
    with torch.inference_mode():
        out = model(torch.tensor([ids]), use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t0 = time.perf_counter()
        for _ in range(tokens - 1):
            out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        return (tokens - 1) / (time.perf_counter() - t0)


def load_hf():
    from transformers import AutoModelForCausalLM

    from inference_core.model.weights import MODELS, gguf_path

    path = gguf_path(MODELS[DEFAULT_MODEL])
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def time_call(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def layer_table(formats: list[str], rounds: int) -> None:
    shapes = [("wqkv", 576, 960), ("wo", 576, 576), ("w_gate_up", 576, 3072), ("w_down", 1536, 576),
              ("head", 576, 49152)]
    print("\nper-layer time at batch 1, µs (best of rounds), speed-up vs F.linear fp32")
    print(f"{'layer':<10}" + "".join(f"{f:>18}" for f in formats))
    for name, k, n in shapes:
        w, x = torch.randn(n, k) * 0.02, torch.randn(1, k)
        layers = {f: quantize_linear(w, f) for f in formats if f != "fp32"}
        reps = 20 if n > 10_000 else 200
        samples: dict[str, list[float]] = {f: [] for f in formats}
        with torch.inference_mode():
            for _ in range(rounds):
                for f in formats:
                    fn = (lambda: F.linear(x, w)) if f == "fp32" else (lambda layer=layers[f]: layer(x))
                    samples[f].append(time_call(fn, reps))
        base = min(samples["fp32"]) if "fp32" in samples else None
        cells = []
        for f in formats:
            t = min(samples[f])
            cells.append(f"{t * 1e6:8.0f} ({base / t:4.1f}×)" if base else f"{t * 1e6:8.0f}")
        print(f"{name:<10}" + "".join(f"{c:>18}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--formats", default="fp32,int8,w8a8,int4-g128,int4-g32,nf4,fp8")
    ap.add_argument("--no-hf", action="store_true", help="skip the transformers fp32 reference")
    ap.add_argument("--no-layers", action="store_true", help="skip the per-layer table")
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"default {DEFAULT_MODEL}; or a speed-only shape: "
                    f"{', '.join(SPEED_ONLY_MODELS)} (random weights)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    formats = [f for f in args.formats.split(",") if f]
    speed_only = args.model in SPEED_ONLY_MODELS
    if speed_only:  # no transformers/llama.cpp file of random weights, and the layer table times SmolLM2's shapes
        args.no_hf = args.no_layers = True
    base = load_engine(args.model, device="cpu")
    engines = {f: base if f == "fp32"
               else LoadedModel(f"q:{f}", quantize_model(base.model, f), base.tokenizer, base.device)
               for f in formats}
    hf = None if args.no_hf else load_hf()
    ids = base.tokenizer.encode(PROMPT)
    print(f"{base.name}: torch {torch.__version__}, {torch.get_num_threads()} threads, {args.tokens} tokens, "
          f"{args.rounds} interleaved rounds, batch 1\nCPU: {llama_cpp.cpu_description()}")
    speeds: dict[str, list[float]] = {f: [] for f in formats}
    if hf is not None:
        speeds["transformers fp32"] = []
    peers = {f: ft for f, ft in llama_cpp.FILE_TYPES.items() if f in formats} \
        if llama_cpp.llama_bench_path() and not speed_only else {}
    llama: dict[str, list[float]] = {f: [] for f in peers}
    for f in formats:  # warm-up: first calls allocate and build kernels
        ours(engines[f], 4)
    jobs = list(speeds)
    for r in range(args.rounds):
        # The order rotates each round: a format timed right after a PyTorch one (w8a8, transformers) shares the cores
        # with that library's still-spinning OpenMP and BLAS threads, so none may always follow the same one.
        for f in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
            if f == "transformers fp32":
                speeds[f].append(hf_decode(hf, ids, args.tokens))
                continue
            speeds[f].append(ours(engines[f], args.tokens))
            if f in peers:
                llama[f].append(llama_cpp.decode_tps(peers[f], threads=args.threads, n_gen=args.tokens, repetitions=1))
    ref = max(speeds["fp32"]) if "fp32" in speeds else None
    print(f"\n{'format':<18} {'weights MiB':>11} {'best tok/s':>10} {'median':>7} {'vs our fp32':>12}  kernel")
    for name, vals in speeds.items():
        best, med = max(vals), statistics.median(vals)
        eng = engines.get(name)
        mib = f"{matmul_weight_bytes(eng.model) / 2**20:11.1f}" if eng else f"{'':>11}"
        kern = runner_for(eng.model).kernel if eng else "transformers LlamaForCausalLM"
        ratio = f"{best / ref:11.2f}×" if ref else ""
        print(f"{name:<18} {mib} {best:10.1f} {med:7.1f} {ratio:>12}  {kern}", flush=True)
    if llama:
        print(f"\n{'vs llama.cpp':<18} {'file':>6} {'llama tok/s':>11} {'ours':>7} {'ratio':>7}  (medians)")
        for f, vals in llama.items():
            ours_med, theirs = statistics.median(speeds[f]), statistics.median(vals)
            print(f"{f:<18} {peers[f]:>6} {theirs:11.1f} {ours_med:7.1f} {ours_med / theirs:6.2f}×")
    elif not speed_only:
        print("\nllama.cpp column skipped: `make bench-peers` builds llama-bench")
    if not args.no_layers:
        layer_table(formats, args.rounds)


if __name__ == "__main__":
    main()
