"""Fused dequantize-and-multiply for weight-only quantized linears: y = x @ dequant(W).T in one kernel."""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

BLOCK_N = 32  # columns per program: N = 576 gives 18 programs, N = 4096 gives 128 (an H100 has 132 SMs)
BLOCK_K = 128  # K per iteration for per-channel formats: 4 KiB of int8 weight per tile at BLOCK_N = 32


def _block_m(m: int) -> int:
    """Rows per program: 1 (the GEMV path), else 16, 32 or 64 (tl.dot's minimum is 16): one program row, so one
    read of the weights, up to the step graphs' largest bucket; larger M takes more programs."""
    return 1 if m == 1 else 16 if m <= 16 else 32 if m <= 32 else 64


def _dot_f32(x: torch.Tensor) -> bool:
    # under TRITON_INTERPRET (as `triton_kernels.interpreted()` reads it; not imported: this module stays a leaf)
    return x.dtype == torch.float32 or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# ------------------------------------------------------------------------------------------- kernels


@triton.jit
def _e4m3_to_f32(b):
    """float8_e4m3fn bits (uint8) → fp32, by building the fp32 bit pattern (exact; no fp8 hardware needed)."""
    b = b.to(tl.uint32)
    sign = (b & 0x80) << 24
    exp = (b >> 3) & 0xF
    man = b & 0x7
    normal = (sign | ((exp + 120) << 23) | (man << 20)).to(tl.float32, bitcast=True)  # bias 7 → 127
    sub = man.to(tl.float32) * 0.001953125  # exp == 0: man · 2⁻⁹
    sub = tl.where(sign != 0, -sub, sub)
    return tl.where(exp == 0, sub, normal)


@triton.jit
def _product(x, w, BLOCK_M: tl.constexpr, DOT_F32: tl.constexpr):
    """x [BLOCK_M, BK] × decoded w [BK, BLOCK_N] (fp32 codes) → fp32 [BLOCK_M, BLOCK_N]."""
    if BLOCK_M == 1:  # GEMV: exactly one FMA per weight, no padded rows
        out = tl.sum(x.to(tl.float32)[:, :, None] * w[None, :, :], axis=1)
    elif DOT_F32:
        out = tl.dot(x.to(tl.float32), w, input_precision="ieee")
    else:  # bf16/fp16 tensor-core MMA; the codes are exact in x's dtype
        out = tl.dot(x, w.to(x.dtype))
    return out


@triton.jit
def _per_channel_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K,
                        FP8: tl.constexpr, DOT_F32: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y[m, n] = scale[n] · Σ_k x[m, k] · q[n, k] for int8 (or e4m3 bits when FP8) q of shape [N, K]."""
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = offs_m < M, offs_n < N
    w_rows = w_ptr + offs_n.to(tl.int64)[None, :] * K  # int64: N·K of a vocab head can pass 2³¹
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        x = tl.load(x_ptr + offs_m[:, None] * K + offs_k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        q = tl.load(w_rows + offs_k[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0)  # [BLOCK_K, BLOCK_N]
        if FP8:
            w = _e4m3_to_f32(q)
        else:
            w = q.to(tl.float32)
        acc += _product(x, w, BLOCK_M, DOT_F32)
    scale = tl.load(s_ptr + offs_n, mask=n_ok, other=0.0)
    acc = acc * scale[None, :]
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _nibble_kernel(x_ptr, p_ptr, s_ptr, lut_ptr, y_ptr, M, N, K, n_groups,
                   GROUP: tl.constexpr, USE_LUT: tl.constexpr, DOT_F32: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """y[m, n] = Σ_g scale[n, g] · Σ_{k ∈ g} x[m, k] · value(code[n, k]), codes packed two per byte."""
    HALF: tl.constexpr = GROUP // 2
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = offs_m < M, offs_n < N
    offs_b = tl.arange(0, HALF)  # byte within the group
    k_lo_in_group = (offs_b // 16) * 32 + offs_b % 16  # value held by the low nibble; the high one is +16
    p_rows = p_ptr + offs_n.to(tl.int64)[None, :] * (K // 2)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for g in range(0, n_groups):
        k_lo = g * GROUP + k_lo_in_group
        k_ok = k_lo < K  # K % 32 == 0, so a byte's two values are both in range or both past a short last group
        x_mask = m_ok[:, None] & k_ok[None, :]
        x_lo = tl.load(x_ptr + offs_m[:, None] * K + k_lo[None, :], mask=x_mask, other=0.0)
        x_hi = tl.load(x_ptr + offs_m[:, None] * K + (k_lo + 16)[None, :], mask=x_mask, other=0.0)
        byte = tl.load(p_rows + (g * HALF + offs_b)[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0)
        lo, hi = byte & 0xF, byte >> 4  # [HALF, BLOCK_N] codes
        if USE_LUT:
            w_lo = tl.load(lut_ptr + lo.to(tl.int32))
            w_hi = tl.load(lut_ptr + hi.to(tl.int32))
        else:
            w_lo = lo.to(tl.float32) - 8.0
            w_hi = hi.to(tl.float32) - 8.0
        part = _product(x_lo, w_lo, BLOCK_M, DOT_F32) + _product(x_hi, w_hi, BLOCK_M, DOT_F32)
        scale = tl.load(s_ptr + offs_n * n_groups + g, mask=n_ok, other=0.0)
        acc += part * scale[None, :]
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


# ------------------------------------------------------------------------------------------ launchers


def _launch(x: torch.Tensor, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, int, tuple[int, int]]:
    """(x as rows [M, K], the output [M, N], BLOCK_M, the grid) of one product."""
    if x.shape[-1] != k:
        raise ValueError(f"x has {x.shape[-1]} features, the weight {k}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"activations must be fp32, bf16 or fp16, not {x.dtype}")
    x2 = x.reshape(-1, k).contiguous()
    m, bm = x2.shape[0], _block_m(x2.shape[0])
    return x2, torch.empty(m, n, dtype=x2.dtype, device=x2.device), bm, (triton.cdiv(n, BLOCK_N), triton.cdiv(m, bm))


def per_channel_matmul(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [..., K] @ (q [N, K] · scale[:, None]).T → [..., N] in x's dtype; q int8 or float8_e4m3fn."""
    fp8 = q.dtype == torch.float8_e4m3fn
    q = q.view(torch.uint8) if fp8 else q
    n, k = q.shape
    x2, y, bm, grid = _launch(x, n, k)
    _per_channel_kernel[grid](x2, q.contiguous(), scale.float().contiguous(), y, x2.shape[0], n, k,
                              FP8=fp8, DOT_F32=_dot_f32(x2), BLOCK_M=bm, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return y.reshape(*x.shape[:-1], n)


def nibble_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, group: int,
                  lut: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] @ W.T → [..., N], W [N, K] packed two 4-bit codes per byte [N, K/2] with a scale per `group`
    inputs [N, ⌈K/group⌉]: int4 (code − 8) without `lut`, NF4 with its 16-value codebook as `lut`."""
    n, k = packed.shape[0], packed.shape[1] * 2
    if k % 32 or group not in (32, 64, 128):
        raise ValueError(f"K={k} must be a multiple of 32 and group={group} one of 32, 64, 128")
    n_groups = -(-k // group)
    if scale.shape != (n, n_groups):
        raise ValueError(f"scale shape {tuple(scale.shape)} != ({n}, {n_groups}) for group {group}")
    x2, y, bm, grid = _launch(x, n, k)
    table = scale if lut is None else lut.float().contiguous()  # any valid pointer when there is no table
    _nibble_kernel[grid](x2, packed.contiguous(), scale.float().contiguous(), table, y, x2.shape[0], n, k, n_groups,
                         GROUP=group, USE_LUT=lut is not None, DOT_F32=_dot_f32(x2), BLOCK_M=bm, BLOCK_N=BLOCK_N)
    return y.reshape(*x.shape[:-1], n)


# --------------------------------------------------------------------------- the hook for the runner


def product(x: torch.Tensor, layer) -> torch.Tensor:
    """x @ dequant(W).T through the fused kernel (what `PackedLinear.product` runs on a GPU)."""
    if layer.fmt.kind not in ("int8", "fp8", "int4", "nf4"):
        raise TypeError(f"no Triton kernel for {type(layer).__name__} ({layer.fmt.name})")
    if layer.fmt.group:  # int4, nf4
        return nibble_matmul(x, layer.qweight, layer.scale, layer.fmt.group, layer.codebook)
    return per_channel_matmul(x, layer.qweight, layer.scale)
