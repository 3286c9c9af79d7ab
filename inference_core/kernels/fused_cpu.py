"""The CPU fast path: a whole forward step (every layer and the head) in one native call (quant_kernels/step.cpp)."""
from __future__ import annotations

import torch
from torch import nn

from ..model.config import engine_settings
from . import quant_kernels
from .onednn_linears import cpu_flags
from .quant_kernels import int_dot

# The longest fp32 / weight-only quantized step run fused where oneDNN could take it (measured: engine-notes)
MAX_FUSED_POSITIONS, MAX_FUSED_QUANTIZED_POSITIONS = (128, 0) if "avx512f" in cpu_flags() else (384, 128)


class FusedStep:
    """One model's weights as views for the native forward. Holds no copy of any weight."""

    def __init__(self, model, native, kernel: str) -> None:
        self.model = model
        self.native = native
        self.kernel = kernel  # e.g. "cpu-fused-step int8": named in reports and run headers

    def forward_rows(self, tokens: torch.Tensor, positions: torch.Tensor, seq: torch.Tensor, tables: torch.Tensor,
                     k_pool: torch.Tensor, v_pool: torch.Tensor, rows: torch.Tensor,
                     n_layers: int | None = None, k_scale: torch.Tensor | None = None,
                     v_scale: torch.Tensor | None = None) -> torch.Tensor:
        """A flattened step over a paged pool (fp32, or int8 pages with their scales): row i is `tokens[i]` at
        `positions[i]` of sequence `seq[i]` with blocks `tables[seq[i]]`. Logits [len(rows), vocab]."""
        x = self.model.tok_embeddings.weight.index_select(0, tokens)
        return self.native.forward(x, positions, seq, tables, k_pool, v_pool, rows,
                                   -1 if n_layers is None else n_layers, k_scale, v_scale)


def _linear(kernels, layer: nn.Module):
    """A native weight view of an nn.Linear or a quantized layer (`fused_view`); None without a kernel."""
    if not isinstance(layer, nn.Linear):
        return layer.fused_view(kernels) if hasattr(layer, "fused_view") else None
    weight, bias = layer.weight, layer.bias
    if weight.dtype != torch.float32:
        return None
    if not weight.is_contiguous():
        weight.data = weight.data.contiguous()  # undo store_wide_weights_column_major: the kernels read rows
    return kernels.make_linear(0, weight.detach(), None, None if bias is None else bias.detach().contiguous(), 0, None)


def build(model) -> tuple[FusedStep | None, str]:
    """The model's fused step and "", or None and why there is none."""
    if not engine_settings().cpu_fastpath:
        return None, "disabled by INFERENCE_CPU_FASTPATH=0"
    if model.tok_embeddings.weight.device.type != "cpu" or model.tok_embeddings.weight.dtype != torch.float32:
        return None, "the fused step runs fp32 activations on the CPU"
    kernels = quant_kernels.load(engine_settings())
    if kernels is None:
        return None, f"compiled kernels unavailable ({quant_kernels.why_unavailable(engine_settings())})"
    cfg, fmt = model.config, getattr(model, "quant_format", None)
    name, layers = fmt.name if fmt is not None else "fp32", []
    for block in model.layers:
        att, ffn = block.attention, block.feed_forward
        views = [_linear(kernels, m) for m in (att.wqkv, att.wo, ffn.w_gate_up, ffn.w_down)]
        if any(v is None for v in views):
            return None, f"no fused kernel for the {name} format"
        layers.append(kernels.Layer(block.attention_norm.weight.detach(), views[0], views[1],
                                    block.ffn_norm.weight.detach(), views[2], views[3]))
    head = _linear(kernels, model.output)
    if head is None:
        return None, f"no fused kernel for the {name} head"
    native = kernels.FusedModel(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_dim, cfg.norm_eps, layers,
                                model.norm.weight.detach(), head, model.rope_cos, model.rope_sin)
    path, _ = int_dot.choose(kernels, engine_settings())  # int8/int4 on integer dot products where the CPU has them
    suffix = f" {path}" if native.use_int_dot(path) and path != "float" else ""  # named when any projection took it
    return FusedStep(model, native, f"cpu-fused-step {name}{suffix}"), ""
