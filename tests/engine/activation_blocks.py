"""The integer-dot-product arithmetic of the fused CPU step's int8/int4 path, in PyTorch (its readable reference).

The fused step (kernels/quant_kernels/int_dot.h on AVX-512 VNNI, int_dot_avx2.h on AVX2) computes an int8 or int4
projection as llama.cpp does: the activations are rounded to int8 per block of 32 values, each block with its own scale,
    s_b = max|x_b| / 127,   q = round-half-to-even(x / s_b), clamped to ±127   (s_b = 0, q = 0 for an all-zero block)
and then
    y[n] = wscale · Σ_b s_b · Σ_{k∈b} q_k · w_k     (w = int8 code, or nibble − 8 with wscale per group)
where the inner sums are exact integers. The only change from the weight-only float path (x · dequant(W)) is
the activations' rounding: each value moves by at most s_b / 2 (0.4% of its block's largest value).

`product(layer, x)` is that arithmetic for one int8 / int4 PackedLinear (in float64, so the integer sums are exact;
the kernel's fp32 outer sums agree to fp32 rounding). `reference_forward(model)` runs the model's reference forward
(Transformer.forward) with every such layer computing it: greedy tokens of the fused step on an integer path equal
those of this forward.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from inference_core.quant.formats import unpack_nibbles
from inference_core.quant.linears import PackedLinear

BLOCK = 32


def quantize_blocks(x: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] (K a multiple of `block`) → (q int8 [M, K], scale fp32 [M, K / block]), as int_dot.h computes them."""
    m, k = x.shape
    xb = x.float().reshape(m, k // block, block)
    scale = xb.abs().amax(dim=2) / 127.0
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.round(xb / safe[..., None]).clamp_(-127, 127)
    q = torch.where(scale[..., None] == 0, torch.zeros_like(q), q)
    return q.to(torch.int8).reshape(m, k), scale


def _codes(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(signed weight codes [N, K] as int8 values, scales [N, G], values per scale G) of an int8/int4 layer."""
    kind = layer.fmt.kind if isinstance(layer, PackedLinear) else None
    if kind == "int8":
        return layer.qweight, layer.scale[:, None], layer.in_features
    if kind == "int4":
        return unpack_nibbles(layer.qweight).to(torch.int8) - 8, layer.scale, layer.fmt.group
    raise TypeError(f"{type(layer).__name__} has no integer-dot-product path (int8 and int4 only)")


def product(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """x Wᵀ (no bias) with x rounded per block to int8 and integer block sums: the VNNI path's arithmetic."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    q, s = quantize_blocks(x2)
    codes, wscale, group = _codes(layer)
    m, k = x2.shape
    n, nb = codes.shape[0], k // BLOCK
    block_group = torch.arange(nb) * BLOCK // group  # a block never straddles two groups (G is a multiple of 32)
    w_of_block = wscale.double()[:, block_group]  # [N, B]
    wb = codes.double().reshape(n, nb, BLOCK)
    y = torch.empty(m, n, dtype=torch.float64)
    step = max(1, 2**24 // (n * nb))  # rows at a time: the [rows, N, B] block sums stay ~128 MB
    for r in range(0, m, step):
        # exact integer block sums (|q·w| ≤ 127² per value; float64 holds them exactly)
        isum = torch.einsum("mbi,nbi->mnb", q[r:r + step].double().reshape(-1, nb, BLOCK), wb)
        y[r:r + step] = (isum * s[r:r + step].double()[:, None, :] * w_of_block[None]).sum(dim=2)
    return y.float().reshape(*shape[:-1], n)


def applies_to(layer: nn.Module) -> bool:
    return isinstance(layer, PackedLinear) and layer.fmt.kind in ("int8", "int4")


@contextmanager
def reference_forward(model: nn.Module) -> Iterator[nn.Module]:
    """The model with every int8/int4 layer's product computed as `product` does, for the block; restored after."""
    layers = [mod for mod in model.modules() if applies_to(mod)]
    for layer in layers:
        layer.product = lambda x, layer=layer: product(layer, x)  # an instance attribute shadows the method
    try:
        yield model
    finally:
        for layer in layers:
            del layer.product
