"""The one place a quantized model is made, and the sizes reports compare (weight, resident bytes)."""
from __future__ import annotations

import copy
from collections.abc import Iterator

from torch import nn

from .formats import QuantFormat, parse_format
from .linears import QuantizedLinear, quantize_linear

PROJECTIONS = ("attention.wqkv", "attention.wo", "feed_forward.w_gate_up", "feed_forward.w_down")


def _projections(model: nn.Module) -> Iterator[tuple[nn.Module, str]]:
    """(owner, attribute name) of every linear a decode step multiplies by: each block's projections, the head."""
    for block in model.layers:
        for path in PROJECTIONS:
            parent_name, attr = path.split(".")
            yield getattr(block, parent_name), attr
    yield model, "output"


def quantize_model(model: nn.Module, fmt: QuantFormat | str) -> nn.Module:
    """A copy of `model` (tensors shared) with each block's wqkv, wo, w_gate_up, w_down and the head quantized."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    shared = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    model = copy.deepcopy(model, memo=shared)
    if fmt.kind == "fp32":
        return model
    for parent, attr in _projections(model):
        setattr(parent, attr, quantize_linear(getattr(parent, attr), fmt))
    model.quant_format = fmt
    return model


def matmul_weight_bytes(model: nn.Module) -> int:
    """Bytes of every matrix a decode step multiplies by (the projections and the head), as stored."""
    layers = (getattr(parent, attr) for parent, attr in _projections(model))
    return sum(m.weight_bytes() if isinstance(m, QuantizedLinear) else m.weight.nbytes for m in layers)


def resident_bytes(model: nn.Module) -> int:
    """Bytes the model holds: every distinct parameter and persistent buffer (tied tensors once), plus what layers
    keep beside them (w8a8: FBGEMM's prepacked copy)."""
    seen: dict[int, int] = {}
    for t in list(model.parameters()) + [b for n, b in model.named_buffers() if "rope_" not in n]:
        seen[t.data_ptr()] = t.nbytes
    return sum(seen.values()) + sum(m.prepacked_bytes() for m in model.modules() if hasattr(m, "prepacked_bytes"))
