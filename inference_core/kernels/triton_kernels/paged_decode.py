"""Paged-decode attention: one new query token per sequence over the paged KV pool, split-K (flash-decoding)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # positions per tile: several 16-slot pages per load, so each program has more reads in flight
MAX_SPLITS = 32


def num_splits(batch: int, n_heads: int, max_positions: int, device: torch.device) -> int:
    """Partitions per sequence: enough programs for two per SM across the batch, never a partition shorter than
    one tile. Fixed by the shapes alone, so a captured graph's choice holds for every replay."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    want = -(-2 * sms // (batch * n_heads))
    return max(1, min(want, MAX_SPLITS, -(-max_positions // BLOCK_N)))


@triton.jit
def _paged_decode_partial(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, tables_ptr, lens_ptr, out_ptr, m_ptr, l_ptr, acc_ptr,
                          scale, stride_qb, stride_qh, stride_kb, stride_kh, stride_kt, stride_sb, stride_sh,
                          stride_tb, stride_ob, stride_oh, n_heads, max_blocks, block_size, head_dim,
                          GROUP: tl.constexpr, SPLIT: tl.constexpr, QUANT: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr):
    head = tl.program_id(0)
    seq = tl.program_id(1)
    split = tl.program_id(2)
    kv_head = head // GROUP
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim

    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + offs_d, mask=d_ok, other=0.0).to(tl.float32)
    q = q * scale  # fold the softmax scale into q once instead of into every score
    ctx = tl.minimum(tl.load(lens_ptr + seq), max_blocks * block_size)  # never index past the padded table
    # this sequence's context cut into equal partitions a whole number of tiles long (only the last tile of a
    # partition is ragged): a 700-token context keeps every partition busy, not the first few of the table's width
    part_len = tl.cdiv(tl.cdiv(ctx, tl.num_programs(2)), BLOCK_N) * BLOCK_N
    start = split * part_len
    end = tl.minimum(start + part_len, ctx)
    kv_base = kv_head.to(tl.int64) * stride_kh

    m_i = tl.full([1], float("-inf"), tl.float32)  # running max of the scores
    l_i = tl.zeros([1], tl.float32)  # running Σ exp(score - m_i)
    acc = tl.zeros([BLOCK_D], tl.float32)  # running Σ exp(score - m_i) · v
    for t in range(start, end, BLOCK_N):  # empty when this partition starts at or past the context's end
        pos = t + offs_n
        pos_ok = pos < end
        page = tl.load(tables_ptr + seq * stride_tb + pos // block_size, mask=pos_ok, other=0).to(tl.int64)
        rows = page * stride_kb + kv_base + (pos % block_size) * stride_kt
        mask = pos_ok[:, None] & d_ok[None, :]
        # masked slots load 0, never stale or uninitialised memory: 0 · NaN would poison the sum
        k = tl.load(k_ptr + rows[:, None] + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + rows[:, None] + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
        if QUANT:  # int8 pages: one scale per (page, kv head, slot); masked slots stay 0
            srows = page * stride_sb + kv_head.to(tl.int64) * stride_sh + (pos % block_size)
            k = k * tl.load(ks_ptr + srows, mask=pos_ok, other=0.0).to(tl.float32)[:, None]
            v = v * tl.load(vs_ptr + srows, mask=pos_ok, other=0.0).to(tl.float32)[:, None]
        s = tl.sum(k * q[None, :], axis=1)  # [BLOCK_N]
        s = tl.where(pos_ok, s, float("-inf"))
        # every visited tile holds ≥ 1 valid position, so m_new is finite and exp never sees inf - inf
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)  # 0 on the first tile (m_i = -inf)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new

    if SPLIT:
        part = (seq * n_heads + head) * tl.num_programs(2) + split
        tl.store(m_ptr + part + tl.arange(0, 1), m_i)
        tl.store(l_ptr + part + tl.arange(0, 1), l_i)
        tl.store(acc_ptr + part * BLOCK_D + offs_d, acc)
    else:
        out = acc / tl.maximum(l_i, 1e-30)  # context_len 0: acc = 0, l = 0 → zeros
        tl.store(out_ptr + seq * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty), mask=d_ok)


@triton.jit
def _paged_decode_merge(m_ptr, l_ptr, acc_ptr, out_ptr, stride_ob, stride_oh, n_heads, head_dim,
                        SPLITS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s over one (sequence, head)'s partitions, M = max_s m_s;
    partitions past the context (m_s = -inf) weigh 0, and a row with none at all gets zeros."""
    head = tl.program_id(0)
    seq = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < SPLITS
    base = (seq * n_heads + head) * SPLITS
    m = tl.load(m_ptr + base + offs_s, mask=s_ok, other=float("-inf"))
    l = tl.load(l_ptr + base + offs_s, mask=s_ok, other=0.0)
    acc = tl.load(acc_ptr + (base + offs_s)[:, None] * BLOCK_D + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    m_max = tl.max(m, axis=0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - m_max))
    out = tl.sum(w[:, None] * acc, axis=0) / tl.maximum(tl.sum(w * l, axis=0), 1e-30)
    tl.store(out_ptr + seq * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty),
             mask=offs_d < head_dim)


def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_tables: torch.Tensor,
                 context_lens: torch.Tensor, scale: float | None = None,
                 out: torch.Tensor | None = None, splits: int | None = None,
                 k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of each sequence's one new query over its paged context; see the module docstring."""
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
    quant = k_scale is not None
    if quant != (k.dtype == torch.int8) or quant != (v_scale is not None):
        raise ValueError("int8 k and v need both scales; float k and v take none")
    if quant and (k_scale.shape != k.shape[:-1] or k_scale.stride(-1) != 1 or k_scale.stride() != v_scale.stride()):
        raise ValueError(f"scales {tuple(k_scale.shape)} do not fit k {tuple(k.shape)}")
    ks, vs = (k_scale, v_scale) if quant else (k, v)  # unread placeholders without scales
    q = q if q.stride(-1) == 1 else q.contiguous()
    tables = block_tables.contiguous()
    if out is None:
        out = torch.empty_like(q)
    scale = head_dim ** -0.5 if scale is None else float(scale)
    max_blocks = tables.shape[1]
    n_splits = splits or num_splits(b, n_heads, max_blocks * block_size, q.device)
    block_d = triton.next_power_of_2(head_dim)
    if n_splits > 1:
        m = torch.empty((b, n_heads, n_splits), dtype=torch.float32, device=q.device)
        l = torch.empty_like(m)
        acc = torch.empty((b, n_heads, n_splits, block_d), dtype=torch.float32, device=q.device)
    else:
        m = l = acc = out  # unused: the one partition writes the output itself
    _paged_decode_partial[(n_heads, b, n_splits)](
        q, k, v, ks, vs, tables, context_lens.contiguous(), out, m, l, acc, scale,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), ks.stride(0), ks.stride(1),
        tables.stride(0), out.stride(0), out.stride(1), n_heads, max_blocks, block_size, head_dim,
        GROUP=n_heads // kv_heads, SPLIT=n_splits > 1, QUANT=quant, BLOCK_N=BLOCK_N, BLOCK_D=block_d)
    if n_splits > 1:
        _paged_decode_merge[(n_heads, b)](m, l, acc, out, out.stride(0), out.stride(1), n_heads, head_dim,
                                          SPLITS=n_splits, BLOCK_S=triton.next_power_of_2(n_splits), BLOCK_D=block_d)
    return out

