"""Prefill of one long prompt per long-step path, interleaved in one process (medians of process CPU seconds).

Run:  .venv/bin/python bench/prefill.py          (BENCH_THREADS=1, BENCH_REPEATS=3, BENCH_PROMPT_TOKENS=512,1714)

Paths (onednn_linears.py), each named with the precision its linears ran in:
  fp32 model: the default (the fused fp32 step up to MAX_FUSED_POSITIONS tokens, oneDNN's fp32 GEMM above), each
    of those two forced · AMX bf16 (INFERENCE_LONG_STEP_PRECISION=bf16) · the bf16 request on a
    CPU without AMX (INFERENCE_AMX=off: stays fp32) · transformers fp32 and bf16 forwards of the same prompt
  int8 weight-only: the fused step's per-row kernels (what ran before; only ≤ 128 tokens, longer prompts crashed
    in its chunks) · one dequantize + oneDNN fp32 · + AMX bf16
  w8a8: AMX int8 (s8 × s8 tiles) · INFERENCE_AMX=off (its Python reference: fake-quantized activations, fp32 GEMM)
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core import load_engine  # noqa: E402
from inference_core.engine.loaded_model import LoadedModel  # noqa: E402
from inference_core.engine import model_runner  # noqa: E402
from inference_core.engine.model_runner import runner_for  # noqa: E402
from inference_core.kernels import onednn_linears  # noqa: E402
from inference_core.quant.quantize import quantize_model  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "1"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
LENGTHS = [int(n) for n in os.environ.get("BENCH_PROMPT_TOKENS", "512,1714").split(",")]
torch.set_num_threads(THREADS)


@contextmanager
def env(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def prefill(engine: LoadedModel, ids: list[int], fused: bool = False, cap: int | None = None) -> float:
    """CPU seconds of one forward over `ids` (logits of the last row) through the engine's runner. `cap`: the
    longest fp32 step the runner sends to the fused step (model_runner.MAX_FUSED_POSITIONS) for this forward."""
    runner = runner_for(engine.model)
    onednn, runner._onednn = runner._onednn, runner._onednn and not fused  # fused: the step as it was dispatched
    saved_cap = model_runner.MAX_FUSED_POSITIONS
    model_runner.MAX_FUSED_POSITIONS = saved_cap if cap is None else cap
    try:
        seq = runner.new_sequence(len(ids))
        t0 = time.process_time()
        runner.forward_sequence(ids, seq)
        return time.process_time() - t0
    finally:
        runner._onednn, model_runner.MAX_FUSED_POSITIONS = onednn, saved_cap


def hf_prefill(hf, ids: list[int]) -> float:
    with torch.inference_mode():
        t0 = time.process_time()
        hf(torch.tensor([ids]), use_cache=False, logits_to_keep=1)
        return time.process_time() - t0


def main() -> None:
    from bench.batching import load_hf

    base = load_engine(device="cpu")
    flags = onednn_linears.cpu_flags()
    print(f"CPU: {cpu_model()}; AMX bf16 {'amx_bf16' in flags}, AMX int8 {'amx_int8' in flags}; "
          f"torch {torch.__version__}, {THREADS} thread(s), load average {os.getloadavg()[0]:.2f}", flush=True)
    int8 = LoadedModel("int8", quantize_model(base.model, "int8"), base.tokenizer, base.device)
    w8a8 = LoadedModel("w8a8", quantize_model(base.model, "w8a8"), base.tokenizer, base.device)
    hf32, hf16 = load_hf(torch.float32), load_hf(torch.bfloat16)
    text = " ".join(f"Section {i}: the library opens at nine, closes at five, and lends books for three weeks."
                    for i in range(400))
    ids_all = base.tokenizer.encode(text)
    bf16, off = dict(INFERENCE_LONG_STEP_PRECISION="bf16"), dict(INFERENCE_AMX="off")
    for n in [120] + LENGTHS:
        ids = ids_all[:n]
        cases = {
            f"fp32 model, default (fused ≤ {model_runner.MAX_FUSED_POSITIONS}, else oneDNN fp32)": lambda: prefill(base, ids),
            "fp32 model, fused step in one call": lambda: prefill(base, ids, cap=len(ids)),
            "fp32 model, oneDNN fp32 (the reference)": lambda: prefill(base, ids, cap=0),
            "fp32 model, AMX bf16 (opt-in)": lambda: with_env(bf16, prefill, base, ids),
            "fp32 model, bf16 asked, no AMX (INFERENCE_AMX=off)": lambda: with_env({**bf16, **off}, prefill, base, ids),
            "transformers fp32": lambda: hf_prefill(hf32, ids),
            "transformers bf16": lambda: hf_prefill(hf16, ids),
            "int8 weight-only, dequantize + oneDNN fp32": lambda: prefill(int8, ids),
            "int8 weight-only, dequantize + AMX bf16": lambda: with_env(bf16, prefill, int8, ids),
            "w8a8, AMX int8": lambda: prefill(w8a8, ids),
            "w8a8, no AMX (its reference)": lambda: with_env(off, prefill, w8a8, ids),
        }
        if n <= 128:  # the fused step's chunks crash on longer prompts (fixed by not sending them there)
            cases["int8 weight-only, fused step (before)"] = lambda: prefill(int8, ids, fused=True)
        times = {k: [] for k in cases}
        for f in cases.values():  # warm-up: weight copies, prepacks, oneDNN primitives
            f()
        for _ in range(REPEATS):  # interleaved: every path once per round
            for k, f in cases.items():
                times[k].append(f())
        print(f"\n{n}-token prompt, median of {REPEATS} interleaved rounds (ms, CPU time; load {os.getloadavg()[0]:.2f}):")
        for k, ts in times.items():
            print(f"  {k:<52} {1000 * statistics.median(ts):8.0f}", flush=True)


def with_env(values: dict, f, *args):
    with env(**values):
        return f(*args)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


if __name__ == "__main__":
    main()
