"""Quantized linears on a CUDA GPU: our formats vs bitsandbytes vs fp32/bf16 cuBLAS, side by side.

    python bench/quant_cuda.py [--tokens 32] [--rounds 3] [--model speed-llama-3-8b] [--formats int8,int4-g128]

Two tables, both measured in this one process:
  1. one linear at batch 1, per shape (SmolLM2's own, and Llama-3-8B's 4096→14336, where weight bytes
     dominate), timed with CUDA events;
  2. decode tokens/s of the model (SmolLM2, or `--model speed-llama-3-8b`: Llama 3 8B's shapes with random
     weights, where weight bytes set the pace) with every projection and the head in each format: ours (fused
     Triton dequantize-and-multiply, in the CUDA graph), the engine's bitsandbytes formats (`bnb-int8`:
     `Linear8bitLt`, `bnb-nf4`: `Linear4bit`, eager), and the model's own dtype (bf16 on CUDA) with and without
     its CUDA graph; each with its share of the bandwidth roofline.
bitsandbytes is optional: its rows are skipped (with the reason) when it cannot be used.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import measure_read_bandwidth, settings_override  # noqa: E402
from inference_core.model.config import DEFAULT_MODEL  # noqa: E402

from inference_core import load_engine  # noqa: E402
from inference_core.engine.loaded_model import GenerationParams, LoadedModel  # noqa: E402
from inference_core.quant.linears import quantize_linear  # noqa: E402
from inference_core.quant.quantize import matmul_weight_bytes, quantize_model
from inference_core.model.speed_models import SPEED_ONLY_MODELS, is_speed_only  # noqa: E402
from inference_core.engine.trace import RunFinished  # noqa: E402

PROMPT = "The old lighthouse keeper looked out at the sea and"
OUR_FORMATS = ["int8", "int4-g128", "nf4", "fp8"]
BNB_FORMATS = ["bnb-int8", "bnb-nf4"]  # inference_core.quant.linears's bitsandbytes backend


def bnb_or_reason():
    """(available, note): whether the engine's bitsandbytes formats run on this GPU, else why not."""
    try:
        w, x = torch.randn(64, 64, device="cuda") * 0.02, torch.randn(1, 64, device="cuda")
        for fmt in BNB_FORMATS:
            err = (quantize_linear(w, fmt)(x) - x @ w.T).abs().max().item()
            if err > 0.05:
                return False, f"{fmt} off by {err:.3g}: not used"
        import bitsandbytes

        return True, f"bitsandbytes {bitsandbytes.__version__}"
    except Exception as exc:  # noqa: BLE001 - any failure means "not available here"
        return False, f"bitsandbytes unavailable: {type(exc).__name__}: {exc}"


def cuda_time(fn, reps: int) -> float:
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3  # µs


def layer_table(bnb, rounds: int) -> None:
    shapes = [("wqkv", 576, 960), ("w_gate_up", 576, 3072), ("w_down", 1536, 576), ("head", 576, 49152),
              ("8B gate", 4096, 14336)]
    kinds = ["fp32", "bf16"] + OUR_FORMATS + (BNB_FORMATS if bnb else [])
    print("\none linear at batch 1 on the GPU, bf16 activations (fp32's own row aside), µs (best of rounds); "
          "ratio = bf16 time / this time")
    print(f"{'layer':<10}" + "".join(f"{k:>17}" for k in kinds))
    for name, k, n in shapes:
        torch.manual_seed(0)
        w = torch.randn(n, k, device="cuda") * 0.02
        x = torch.randn(1, k, device="cuda")
        wb, xb = w.bfloat16(), x.bfloat16()
        fns = {"fp32": lambda: F.linear(x, w), "bf16": lambda: F.linear(xb, wb)}
        for f in OUR_FORMATS + (BNB_FORMATS if bnb else []):
            fns[f] = (lambda layer=quantize_linear(w, f): layer(xb))  # the engine's activations on CUDA
        times = {kind: min(cuda_time(fns[kind], 200) for _ in range(rounds)) for kind in kinds}
        cells = [f"{times[kd]:7.1f} ({times['bf16'] / times[kd]:4.1f}×)" for kd in kinds]
        print(f"{name:<10}" + "".join(f"{c:>17}" for c in cells), flush=True)


def decode_tps(engine: LoadedModel, tokens: int) -> float:
    params = GenerationParams(max_new_tokens=tokens, stop_at_eos=False)
    return [e for e in engine.generate(PROMPT, params) if isinstance(e, RunFinished)][0].tokens_per_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"default {DEFAULT_MODEL}; or a speed-only shape: "
                    f"{', '.join(SPEED_ONLY_MODELS)} (random weights)")
    ap.add_argument("--formats", default=",".join(OUR_FORMATS + BNB_FORMATS),
                    help="weight formats beside the model's own dtype (bitsandbytes ones skipped where unusable)")
    ap.add_argument("--no-layers", action="store_true", help="skip the one-linear table")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    bnb, bnb_note = bnb_or_reason()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {bnb_note}")
    if not args.no_layers:
        layer_table(bnb, args.rounds)

    base = load_engine(args.model, device="cuda")
    dt = base.dtype_name
    graph, eager = f"{dt} (graph)", f"{dt} (eager)"
    engines: dict[str, LoadedModel] = {graph: base, eager: base}
    for f in (f for f in args.formats.split(",") if f and (bnb or f not in BNB_FORMATS)):
        name = f if f in BNB_FORMATS else f"ours {f}"
        engines[name] = LoadedModel(f"q:{f}", quantize_model(base.model, f), base.tokenizer, base.device)
    ids = base.tokenizer.encode(PROMPT)
    first16 = GenerationParams(max_new_tokens=16, stop_at_eos=False)
    ref = base.generate_ids(ids, first16)
    speeds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.rounds + 1):  # the first round warms up (kernels, graphs) and is dropped
        for name, eng in engines.items():
            with settings_override(cuda_graphs=False) if name == eager else contextlib.nullcontext():
                speeds[name].append(decode_tps(eng, args.tokens))
    bandwidth = measure_read_bandwidth(2**30, device="cuda")
    print(f"\n{base.name} decode at batch 1, {args.tokens} tokens, median of {args.rounds} interleaved rounds; "
          f"roofline = {bandwidth:.0f} GB/s measured read bandwidth / matmul weight bytes")
    same_col = f"first 16 tokens = {dt}'s" if not is_speed_only(args.model) else "(random weights: tokens not compared)"
    print(f"{'engine':<16} {'tok/s':>8} {'vs ' + graph:>17} {'weights MB':>11} {'roofline':>9}  {same_col}")
    base_tps = statistics.median(speeds[graph][1:])
    for name, vals in speeds.items():
        tps = statistics.median(vals[1:])
        weight_bytes = matmul_weight_bytes(engines[name].model)
        roofline = bandwidth * 1e9 / weight_bytes
        same = "" if is_speed_only(args.model) else \
            engines[name].generate_ids(ids, first16) == ref
        print(f"{name:<16} {tps:8.1f} {tps / base_tps:16.2f}× {weight_bytes / 1e6:11.0f} {tps / roofline:8.0%}  {same}",
              flush=True)


if __name__ == "__main__":
    main()
