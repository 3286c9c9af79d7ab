"""Quantized linears on a CUDA GPU: our formats vs bitsandbytes vs fp32/bf16 cuBLAS, side by side.

    python bench/quant_cuda.py [--tokens 32] [--rounds 3]

Two tables, both measured in this one process:
  1. one linear at batch 1, per shape (SmolLM2's own, and Llama-3-8B's 4096→14336, where weight bytes
     dominate), timed with CUDA events;
  2. decode tokens/s of SmolLM2 with every projection and the head in each format: ours (dequantize,
     then cuBLAS, eager), bitsandbytes `Linear8bitLt` / `Linear4bit` (nf4) swapped into our model, and
     our fp32 with and without its CUDA graph.
bitsandbytes is optional: its rows are skipped (with the reason) when it cannot be imported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core import load_engine  # noqa: E402
from inference_core.engine import Engine, GenerationParams  # noqa: E402
from inference_core.quant import PROJECTIONS, quantize_linear, quantize_model  # noqa: E402
from inference_core.trace import RunFinished  # noqa: E402

PROMPT = "The old lighthouse keeper looked out at the sea and"
OUR_FORMATS = ["int8", "int4-g128", "nf4", "fp8"]


def bnb_or_reason():
    """(module, note): bitsandbytes if it imports and runs both layer kinds on this GPU, else (None, why)."""
    try:
        import bitsandbytes as bnb

        w, x = torch.randn(64, 64) * 0.02, torch.randn(1, 64, device="cuda")
        for kind in ("bnb-int8", "bnb-nf4"):
            layer = bnb_linear(bnb, w, kind)
            y = layer(x.half() if kind == "bnb-int8" else x).float()
            err = (y - x @ w.cuda().T).abs().max().item()
            if err > 0.05:
                return None, f"bitsandbytes {kind} off by {err:.3g}: not used"
        return bnb, f"bitsandbytes {bnb.__version__}"
    except Exception as exc:  # noqa: BLE001 - any failure means "not available here"
        return None, f"bitsandbytes unavailable: {type(exc).__name__}: {exc}"


def bnb_linear(bnb, weight: torch.Tensor, kind: str) -> nn.Module:
    """A bitsandbytes layer holding `weight` (fp32 [out, in]), quantized on its move to the GPU."""
    out_f, in_f = weight.shape
    if kind == "bnb-int8":
        layer = bnb.nn.Linear8bitLt(in_f, out_f, bias=False, has_fp16_weights=False, threshold=6.0)
        layer.weight = bnb.nn.Int8Params(weight.detach().cpu().half(), requires_grad=False, has_fp16_weights=False)
    else:
        layer = bnb.nn.Linear4bit(in_f, out_f, bias=False, compute_dtype=torch.float32, quant_type="nf4")
        layer.weight = bnb.nn.Params4bit(weight.detach().cpu().float(), requires_grad=False, quant_type="nf4")
    return layer.cuda()


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
    kinds = ["fp32", "bf16"] + OUR_FORMATS + (["bnb-int8", "bnb-nf4"] if bnb else [])
    print("\none linear at batch 1 on the GPU, µs (best of rounds); ratio = fp32 time / this time")
    print(f"{'layer':<10}" + "".join(f"{k:>17}" for k in kinds))
    for name, k, n in shapes:
        torch.manual_seed(0)
        w = torch.randn(n, k, device="cuda") * 0.02
        x = torch.randn(1, k, device="cuda")
        wb, xb = w.bfloat16(), x.bfloat16()
        fns = {"fp32": lambda: F.linear(x, w), "bf16": lambda: F.linear(xb, wb)}
        for f in OUR_FORMATS:
            fns[f] = (lambda layer=quantize_linear(w, f): layer(x))
        if bnb:
            for kind in ("bnb-int8", "bnb-nf4"):
                layer = bnb_linear(bnb, w, kind)
                xin = x.half() if kind == "bnb-int8" else x
                fns[kind] = (lambda layer=layer, xin=xin: layer(xin))
        times = {kind: min(cuda_time(fns[kind], 200) for _ in range(rounds)) for kind in kinds}
        cells = [f"{times[kd]:7.1f} ({times['fp32'] / times[kd]:4.1f}×)" for kd in kinds]
        print(f"{name:<10}" + "".join(f"{c:>17}" for c in cells), flush=True)


def swap_bnb(engine: Engine, bnb, kind: str) -> Engine:
    """A copy of the model whose projections and head are bitsandbytes layers (embedding stays fp32)."""
    import copy

    shared = {id(t): t for t in list(engine.model.parameters()) + list(engine.model.buffers())}
    model = copy.deepcopy(engine.model, memo=shared)
    for block in model.layers:
        for path in PROJECTIONS:
            parent_name, attr = path.split(".")
            parent = getattr(block, parent_name)
            setattr(parent, attr, _Cast(bnb_linear(bnb, getattr(parent, attr).weight, kind), kind))
    model.output = _Cast(bnb_linear(bnb, model.output.weight, kind), kind)
    return Engine(f"{engine.name}:{kind}", model, engine.tokenizer, engine.device)


class _Cast(nn.Module):
    """Linear8bitLt computes in fp16: cast in and out so the fp32 model around it is unchanged."""

    def __init__(self, inner: nn.Module, kind: str) -> None:
        super().__init__()
        self.inner, self.half = inner, kind == "bnb-int8"

    def forward(self, x):
        return self.inner(x.half()).float() if self.half else self.inner(x)


def decode_tps(engine: Engine, tokens: int) -> float:
    params = GenerationParams(max_new_tokens=tokens, stop_at_eos=False)
    return [e for e in engine.generate(PROMPT, params) if isinstance(e, RunFinished)][0].tokens_per_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    bnb, bnb_note = bnb_or_reason()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {bnb_note}")
    layer_table(bnb, args.rounds)

    base = load_engine("smollm2-135m", device="cuda")
    engines: dict[str, Engine] = {"fp32 (graph)": base, "fp32 (eager)": base}
    for f in OUR_FORMATS:
        engines[f"ours {f}"] = Engine(f"q:{f}", quantize_model(base.model, f), base.tokenizer, base.device)
    if bnb:
        for kind in ("bnb-int8", "bnb-nf4"):
            engines[kind] = swap_bnb(base, bnb, kind)
    ids = base.tokenizer.encode(PROMPT)
    ref = base.generate_ids(ids, GenerationParams(max_new_tokens=args.tokens, stop_at_eos=False))
    speeds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.rounds + 1):  # the first round warms up (kernels, graphs) and is dropped
        for name, eng in engines.items():
            if name == "fp32 (eager)" or name.startswith("bnb"):  # bitsandbytes syncs: no graph capture
                os.environ["INFERENCE_CUDA_GRAPHS"] = "0"
            speeds[name].append(decode_tps(eng, args.tokens))
            os.environ.pop("INFERENCE_CUDA_GRAPHS", None)
    print(f"\nSmolLM2-135M decode at batch 1, {args.tokens} tokens, median of {args.rounds} rounds")
    print(f"{'engine':<16} {'tok/s':>8} {'vs fp32 eager':>14}  greedy tokens = fp32's (first 16)")
    eager = statistics.median(speeds["fp32 (eager)"][1:])
    for name, vals in speeds.items():
        tps = statistics.median(vals[1:])
        if name.startswith("bnb"):
            os.environ["INFERENCE_CUDA_GRAPHS"] = "0"
        same = engines[name].generate_ids(ids, GenerationParams(max_new_tokens=16, stop_at_eos=False)) == ref[:16]
        os.environ.pop("INFERENCE_CUDA_GRAPHS", None)
        print(f"{name:<16} {tps:8.1f} {tps / eager:13.2f}×  {same}", flush=True)


if __name__ == "__main__":
    main()
