"""Paged-decode attention: one new query token per sequence over the paged KV pool, in one kernel.

Inputs, as `inference_core.paged` lays them out:
  * q [B, n_heads, head_dim]: each sequence's new query (GQA: n_heads = group · kv_heads, head h reads kv
    head h // group, the `enable_gqa` / repeat_interleave order the torch path uses);
  * k, v: one layer of the pool, [num_blocks, kv_heads, block_size, head_dim] (`pool.k[layer]`);
  * block_tables int32 [B, max_blocks]: logical block i of sequence b is physical block block_tables[b, i]
    (entries past a sequence's last block are padding and never read);
  * context_lens int32 [B]: positions to attend, the new token included (its K/V already written).
Output [B, n_heads, head_dim] in q's dtype.

Invariants: softmax over exactly the first context_len positions, computed online in fp32 block by block
(running max, running sum, rescaled accumulator); a row with context_len 0 (a padding row of a graph
bucket) reads no block and writes zeros. Shapes depend only on B and max_blocks and the launch does no host
sync, so a CUDA graph can capture it.

Tiling: one program per (query head, sequence), heads fastest, so the `group` programs that share a kv head
run side by side and their K/V reads after the first hit L2. Each program walks its sequence's blocks,
loading one [block_size, head_dim] K and V tile per block (padded to powers of two, masked). Scores are
broadcast-multiply + tl.sum (a single query row: tl.dot would need 16 rows). Long contexts with few
sequences leave SMs idle; a split-K (flash-decoding) variant would fix that and is not written yet.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import KERNEL_PAGED_DECODE

KERNEL_NAME = KERNEL_PAGED_DECODE


@triton.jit
def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, out_ptr, scale,
                         stride_qb, stride_qh, stride_kb, stride_kh, stride_kt, stride_tb, stride_ob, stride_oh,
                         max_blocks, block_size, head_dim,
                         GROUP: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    head = tl.program_id(0)
    seq = tl.program_id(1)
    kv_head = head // GROUP
    offs_t = tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    t_ok = offs_t < block_size

    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + offs_d, mask=d_ok, other=0.0).to(tl.float32)
    q = q * scale  # fold the softmax scale into q once instead of into every score
    ctx = tl.load(lens_ptr + seq)
    n_blocks = tl.minimum(tl.cdiv(ctx, block_size), max_blocks)  # never index past the padded table
    kv_base = kv_head.to(tl.int64) * stride_kh
    tile = offs_t[:, None] * stride_kt + offs_d[None, :]

    m_i = tl.full([1], float("-inf"), tl.float32)  # running max of the scores
    l_i = tl.zeros([1], tl.float32)  # running Σ exp(score - m_i)
    acc = tl.zeros([BLOCK_D], tl.float32)  # running Σ exp(score - m_i) · v
    for i in range(0, n_blocks):
        block = tl.load(tables_ptr + seq * stride_tb + i).to(tl.int64)
        pos_ok = t_ok & (i * block_size + offs_t < ctx)
        mask = pos_ok[:, None] & d_ok[None, :]
        base = block * stride_kb + kv_base
        # masked slots load 0, never stale or uninitialised memory: 0 · NaN would poison the sum
        k = tl.load(k_ptr + base + tile, mask=mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + base + tile, mask=mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)  # [BLOCK_T]
        s = tl.where(pos_ok, s, float("-inf"))
        # every visited block holds ≥ 1 valid position, so m_new is finite and exp never sees inf - inf
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)  # 0 on the first block (m_i = -inf)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new

    out = acc / tl.maximum(l_i, 1e-30)  # context_len 0: acc = 0, l = 0 → zeros
    tl.store(out_ptr + seq * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty), mask=d_ok)


def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_tables: torch.Tensor,
                 context_lens: torch.Tensor, scale: float | None = None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of each sequence's one new query over its paged context; see the module docstring.

    `out` (optional, [B, n_heads, head_dim]) is written in place, for a CUDA graph's static output buffer.
    """
    b, n_heads, head_dim = q.shape
    _, kv_heads, block_size, kd = k.shape
    if v.shape != k.shape or kd != head_dim:
        raise ValueError(f"k {tuple(k.shape)}, v {tuple(v.shape)} do not fit q {tuple(q.shape)}")
    if n_heads % kv_heads:
        raise ValueError(f"{n_heads} query heads are not a multiple of {kv_heads} kv heads")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise TypeError("block_tables and context_lens must be int32")
    if block_tables.shape[0] != b or context_lens.shape != (b,):
        raise ValueError(f"block_tables {tuple(block_tables.shape)} / context_lens {tuple(context_lens.shape)} "
                         f"do not match batch {b}")
    if k.stride(-1) != 1 or k.stride() != v.stride():
        raise ValueError("k and v must share strides with a contiguous head_dim")
    q = q if q.stride(-1) == 1 else q.contiguous()
    tables = block_tables.contiguous()
    if out is None:
        out = torch.empty_like(q)
    scale = head_dim ** -0.5 if scale is None else float(scale)
    grid = (n_heads, b)
    _paged_decode_kernel[grid](
        q, k, v, tables, context_lens.contiguous(), out, scale,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), tables.stride(0), out.stride(0), out.stride(1),
        tables.shape[1], block_size, head_dim,
        GROUP=n_heads // kv_heads, BLOCK_T=triton.next_power_of_2(block_size),
        BLOCK_D=triton.next_power_of_2(head_dim))
    return out


def paged_decode_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_tables: torch.Tensor,
                           context_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """The torch answer, one sequence at a time: gather its blocks (`paged.gather_context`), SDPA with GQA in
    fp32, zeros for a context_len 0 row. Slow (host loop, .tolist()); for tests only."""
    from ..paged import gather_context

    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    bs = k.shape[2]
    for row, ctx in enumerate(context_lens.tolist()):
        if ctx == 0:
            continue
        ids = block_tables[row, : -(-ctx // bs)].long()
        ks = gather_context(k, ids, ctx).float()  # [1, Hkv, ctx, D]
        vs = gather_context(v, ids, ctx).float()
        qs = q[row].float()[None, :, None, :]  # [1, Hq, 1, D]
        o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=scale, enable_gqa=True)
        out[row] = o[0, :, 0]
    return out.to(q.dtype)
