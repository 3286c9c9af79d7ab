"""The quantization demo: one layer's weights under a format's grid, activation outliers for the student's
prompt, and the same prompt generated in fp32 and in the chosen format, token by token.

Events, in order: `quant_layer`, `quant_outliers`, `quant_blocks` (the matrix block by block: what the demo's
step timeline walks), `quant_token`… (fp32 and quantized interleaved, one pair
per step), `quant_summary`, `comparison` (the interleaved decode steps' times, bytes read beside them),
`quant_formats` (the recorded quantize-report table, for the trade-off chart).
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import inference_core
from inference_core import DEFAULT_MODEL, RunFinished, TokenStep

from ..spec import DemoSpec, ParamSpec
from .comparison import summarize
from .events import QuantBlocks, QuantFormats, QuantLayer, QuantOutliers, QuantSummary, QuantToken
from .runner import Models

if TYPE_CHECKING:  # the engine (and torch) load in the worker only, inside the functions below
    from inference_core import LoadedModel
    from inference_core.quant.linears import QuantizedLinear

PROJECTIONS = {"wqkv": "attention.wqkv", "wo": "attention.wo", "w_gate_up": "feed_forward.w_gate_up",
               "w_down": "feed_forward.w_down"}
DEMO_FORMATS = ("int8", "w8a8", "int4-g32", "int4-g128", "nf4", "fp8", "llm-int8")
# The recorded `python -m inference_core quantize-report … --json` table (see inference_core/data/README.md).
MEASURED_PATH = Path(inference_core.__file__).resolve().parent / "data" / "quant_measured.json"
# Formats whose decode step runs in the engine's native kernels: the lesson's table has them all faster than
# fp32 on this CPU (fewer bytes read per step). w8a8 and llm-int8 run PyTorch layers: it makes no claim there.
NATIVE_STEP_FORMATS = ("int8", "int4-g32", "int4-g128", "nf4", "fp8")
HEAT = 48  # heatmap tile: the first HEAT rows × HEAT input columns
WALK_TYPICAL, WALK_LARGEST = 16, 8  # blocks the timeline walks: spread over the absmax ranks, and the largest
SAMPLE_BLOCKS = 400  # blocks in the error-per-block scatter (a fixed sample, the walked ones added)
BLOCK_BINS = 24  # histogram bins of one walked block, over ±its absmax
OUTLIER_FACTOR = 6.0  # |w| > 6 × the matrix's rms: far beyond a bell curve's tail (a 6σ weight)


@lru_cache(maxsize=2)
def quantized_engine_for(base: LoadedModel, fmt_name: str) -> LoadedModel:
    """Quantizing all 30 blocks takes seconds; keep the last two formats of the worker's model."""
    from inference_core import LoadedModel
    from inference_core.quant.formats import parse_format
    from inference_core.quant.quantize import quantize_model

    fmt = parse_format(fmt_name)
    return LoadedModel(f"{base.name}:{fmt.name}", quantize_model(base.model, fmt), base.tokenizer, base.device)


def format_grid(layer: QuantizedLinear) -> tuple[list[float], float]:
    """Representable weights of a typical group: the format's levels × the median scale of the matrix."""
    levels, scale, _ = block_levels(layer)
    typical = float(scale.median())
    return [float(v) * typical for v in levels], typical


def projection_weight(model, layer: int, projection: str):
    parent, attr = PROJECTIONS[projection].split(".")
    return getattr(getattr(model.layers[layer], parent), attr).weight.detach().float()


def layer_event(model, fmt_name: str, layer: int, projection: str) -> QuantLayer:
    import torch

    from inference_core.quant.linears import quantize_linear

    w = projection_weight(model, layer, projection)
    q = quantize_linear(w, fmt_name)
    deq = q.dequantize()
    err = (deq - w).abs()
    counts, edges = torch.histogram(w.flatten(), bins=80)
    after = torch.histogram(deq.flatten().clamp(float(edges[0]), float(edges[-1])), bins=edges)[0]
    grid, scale = format_grid(q)
    rmse = float(err.pow(2).mean().sqrt())
    return QuantLayer(
        format=q.fmt.name, layer=layer, projection=projection, shape=list(w.shape), kernel=q.kernel,
        fp32_bytes=w.nbytes, quant_bytes=q.weight_bytes(), hist_edges=[float(e) for e in edges],
        hist_counts=[int(c) for c in counts], grid=grid, grid_scale=scale,
        heatmap=[[round(float(v), 7) for v in row] for row in err[:HEAT, :HEAT]],
        rmse=rmse, max_abs_error=float(err.max()), rel_rmse=rmse / float(w.pow(2).mean().sqrt()),
        dequant_hist_counts=[int(c) for c in after],
    )


def block_levels(q: QuantizedLinear) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The format's levels before scaling, every block's scale [rows, blocks] (a block's representable values
    are levels × scale) and the block size. Per-channel formats have one block per output row."""
    import torch

    from inference_core.quant.formats import FP8_MAX, NF4_CODEBOOK

    kind = q.fmt.kind
    if kind == "nf4":
        return NF4_CODEBOOK.float(), q.scale, q.fmt.group
    if kind == "int4":
        return torch.arange(-7, 8, dtype=torch.float32), q.scale, q.fmt.group
    scale = q.scale[:, None]
    if kind == "fp8":
        every = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
        levels = every[torch.isfinite(every)].unique()
        return levels[levels.abs() <= FP8_MAX], scale, q.in_features
    return torch.arange(-127, 128, dtype=torch.float32), scale, q.in_features  # int8, w8a8, llm-int8


def blocks_event(model, fmt_name: str, layer: int, projection: str) -> QuantBlocks:
    """Every block's largest |w| and error (sampled for the scatter), and a walk through a few blocks whole:
    their histogram before, how many weights landed on each level after, and whether an outlier set the scale."""
    import torch

    from inference_core.quant.formats import _grouped
    from inference_core.quant.linears import quantize_linear

    w = projection_weight(model, layer, projection)
    q = quantize_linear(w, fmt_name)
    levels, scale, group = block_levels(q)
    rows, k = w.shape
    blocks = _grouped(w, group)  # [rows, blocks per row, group]; a short last block is zero-padded
    deq = q.dequantize()
    after = _grouped(deq, group)
    err = _grouped((deq - w).abs(), group)
    real = _grouped(torch.ones_like(w), group) > 0  # the padding is no weight
    absmax = blocks.abs().amax(dim=2).flatten()
    max_err = err.amax(dim=2).flatten()
    per_row = blocks.shape[1]
    weight_rms = float(w.pow(2).mean().sqrt())
    outlier = absmax > OUTLIER_FACTOR * weight_rms
    order = absmax.argsort()
    n = len(order)
    spread = [int(order[round(i * (n - 1) / (WALK_TYPICAL - 1))]) for i in range(WALK_TYPICAL)]
    walked = sorted(set(spread) | {int(i) for i in order[-WALK_LARGEST:]}, key=lambda i: float(absmax[i]))
    sample = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:SAMPLE_BLOCKS].tolist()
    sample = sorted(set(sample) | set(walked))
    walk = []
    for i in walked:
        r, b = divmod(i, per_row)
        values = blocks[r, b][real[r, b]]
        s = float(scale.reshape(rows, -1)[r, b if scale.shape[1] > 1 else 0])
        top = int(values.abs().argmax())
        # The level each weight was rounded to (its dequantized value ÷ the scale is that level, up to fp32).
        codes = (after[r, b][real[r, b]] / s).unsqueeze(1).sub(levels).abs().argmin(dim=1)
        walk.append({
            "row": r, "block": b, "start": b * group, "end": min(k, (b + 1) * group), "scale": s,
            "absmax": float(absmax[i]), "top_value": float(values[top]), "max_error": float(max_err[i]),
            "rms_error": float(err[r, b][real[r, b]].pow(2).mean().sqrt()), "outlier": bool(outlier[i]),
            "hist_counts": [int(c) for c in torch.histc(values, bins=BLOCK_BINS, min=-float(absmax[i]),
                                                        max=float(absmax[i]))],
            "level_counts": [int(c) for c in torch.bincount(codes, minlength=len(levels))],
        })
    return QuantBlocks(
        format=q.fmt.name, layer=layer, projection=projection, group=group, n_blocks=n,
        levels=[float(v) for v in levels], weight_rms=weight_rms, outlier_factor=OUTLIER_FACTOR,
        n_outlier_blocks=int(outlier.sum()), sample_absmax=[round(float(absmax[i]), 6) for i in sample],
        sample_max_error=[round(float(max_err[i]), 7) for i in sample], walk=walk, bins=BLOCK_BINS,
    )


def outliers_event(engine: LoadedModel, prompt_ids: list[int], layer: int, projection: str,
                   threshold: float = 6.0) -> QuantOutliers:
    """Run the fp32 model once on the prompt with hooks recording max |x| per input channel of each projection."""
    import torch

    from inference_core.model.kv_cache import NoCache

    model = engine.model
    absmax: dict[tuple[int, str], torch.Tensor] = {}
    hooks = []
    for i, block in enumerate(model.layers):
        for name, path in PROJECTIONS.items():
            parent, attr = path.split(".")
            mod = getattr(getattr(block, parent), attr)

            def hook(_m, args, key=(i, name)):
                absmax[key] = args[0].detach().abs().amax(dim=(0, 1))

            hooks.append(mod.register_forward_pre_hook(hook))
    try:
        with torch.inference_mode():
            tokens = torch.tensor([prompt_ids], device=engine.device)
            model(tokens, torch.arange(len(prompt_ids), device=engine.device), NoCache(), last_only=True)
    finally:
        for h in hooks:
            h.remove()
    n = len(model.layers)
    chosen = absmax[(layer, projection)].cpu()
    return QuantOutliers(
        threshold=threshold, layer=layer, projection=projection,
        channel_absmax=[round(float(v), 4) for v in chosen],
        outliers_per_layer_attn=[int((absmax[(i, "wqkv")] > threshold).sum()) for i in range(n)],
        outliers_per_layer_mlp=[int((absmax[(i, "w_down")] > threshold).sum()) for i in range(n)],
        top_channels=[int(c) for c in chosen.argsort(descending=True)[:8]],
    )


def recorded_source(data: dict) -> str:
    """How the recorded table was made, as the chart's caption says it: date, device, command (and any note)."""
    if not data.get("command"):
        return data.get("source", "not recorded")
    text = f"{data.get('date', 'undated')} on {data.get('device', 'an unnamed device')}, with {data['command']}"
    return f"{text}. {data['note']}" if data.get("note") else text


def recorded_formats() -> QuantFormats:
    data = json.loads(MEASURED_PATH.read_text()) if MEASURED_PATH.exists() else {"source": "not recorded", "rows": []}
    return QuantFormats(source=recorded_source(data), rows=data.get("rows", []))


def own_rate(step_times: list[float], final: RunFinished) -> float:
    """A generator's decode tokens per second from its own steps' times: 1 / the median step, the same figure as
    the comparison's median ms per step. Its wall-clock rate would count the other generator's steps too, since
    the two alternate step by step (half the true rate of each)."""
    return 1.0 / statistics.median(step_times) if step_times else final.tokens_per_s


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    from inference_core import GenerationParams  # the worker only: the web loads no torch
    from inference_core.quant.formats import parse_format
    from inference_core.quant.quantize import matmul_weight_bytes
    from inference_core.engine.model_runner import kernels_used

    params = SPEC.with_defaults(params)
    model_name = params.get("model", DEFAULT_MODEL)
    fmt = parse_format(params["format"])
    layer = int(params["layer"])
    projection = params["projection"]
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {sorted(PROJECTIONS)}")
    base = models.get(model_name)
    if not 0 <= layer < base.config.n_layers:
        raise ValueError(f"layer must be in [0, {base.config.n_layers})")
    prompt_ids = base.encode_prompt(params["prompt"], chat=False)
    yield layer_event(base.model, fmt.name, layer, projection).to_dict()
    yield outliers_event(base, prompt_ids, layer, projection).to_dict()
    yield blocks_event(base.model, fmt.name, layer, projection).to_dict()
    if should_stop is not None and should_stop():
        return
    quant = quantized_engine_for(base, fmt.name)
    gen = GenerationParams(max_new_tokens=int(params["max_new_tokens"]), stop_at_eos=False)
    streams = {"fp32": base.generate_events(prompt_ids, gen, should_stop),
               fmt.name: quant.generate_events(prompt_ids, gen, should_stop)}
    tokens: dict[str, list[int]] = {"fp32": [], fmt.name: []}
    step_times: dict[str, list[float]] = {"fp32": [], fmt.name: []}
    finals: dict[str, RunFinished] = {}
    for pair in zip(*streams.values()):
        for variant, ev in zip(streams, pair):
            if isinstance(ev, TokenStep):
                tokens[variant].append(ev.token_id)
                if ev.phase == "decode":
                    step_times[variant].append(ev.step_time_s)
                ref = tokens["fp32"][ev.step] if len(tokens["fp32"]) > ev.step else ev.token_id
                yield QuantToken(variant=variant, step=ev.step, token_id=ev.token_id, text=ev.text,
                                 step_time_s=ev.step_time_s, same_as_fp32=ev.token_id == ref).to_dict()
            elif isinstance(ev, RunFinished):
                finals[variant] = ev
    if len(finals) == 2 and all(f.finish_reason != "cancelled" for f in finals.values()):
        a, b = tokens["fp32"], tokens[fmt.name]
        same = [x == y for x, y in zip(a, b)]
        fp32_bytes, quant_bytes = matmul_weight_bytes(base.model), matmul_weight_bytes(quant.model)
        yield QuantSummary(
            format=fmt.name, kernels=kernels_used(quant.model), fp32_matmul_bytes=fp32_bytes,
            quant_matmul_bytes=quant_bytes,
            fp32_decode_tokens_per_s=own_rate(step_times["fp32"], finals["fp32"]),
            quant_decode_tokens_per_s=own_rate(step_times[fmt.name], finals[fmt.name]), n_generated=len(b),
            first_divergence=same.index(False) if False in same else -1,
            agreement=sum(same) / len(same) if same else 1.0,
            fp32_text=finals["fp32"].text, quant_text=finals[fmt.name].text,
        ).to_dict()
        if all(step_times.values()):
            # The two generations alternate step by step, and each step is one uninterrupted forward: the decode
            # steps are the repeats (`comparison.py`).
            yield summarize("time of one decode step", ("fp32", fmt.name), step_times,
                            {"fp32": {"weight bytes read per step": fp32_bytes},
                             fmt.name: {"weight bytes read per step": quant_bytes}},
                            claim=fmt.name if fmt.name in NATIVE_STEP_FORMATS else "").to_dict()
    yield recorded_formats().to_dict()


SPEC = DemoSpec(
    name="quantization",
    title="Quantization: fewer bits per weight, live",
    description=(
        "One layer's weights under a format's grid with its error, activation outliers for your prompt, and "
        "the same prompt generated in fp32 and in the chosen format, token by token."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/quantization.js",
    params={
        "prompt": ParamSpec("str", default="The capital of France is", label="Prompt", max_chars=2000,
                            max_tokens=64),
        "format": ParamSpec("choice", default="int4-g128", label="Format", choices=DEMO_FORMATS),
        "layer": ParamSpec("int", default=3, label="Layer", min_value=0, max_value=29),
        "projection": ParamSpec("choice", default="w_down", label="Projection", choices=tuple(PROJECTIONS)),
        "max_new_tokens": ParamSpec("int", default=16, label="New tokens", min_value=1, max_value=24),
    },
    try_next=(
        "Switch the format to int8 and run again: the text usually matches fp32 token for token; then try "
        "int4-g32 and nf4 and see where the outputs part.",
        "Set the format to llm-int8: it keeps the activation outliers of the outlier chart in floating point; "
        "compare its text and bytes per token with int8's.",
    ),
)
