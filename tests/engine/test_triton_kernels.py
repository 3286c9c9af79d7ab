"""The Triton kernels (issue 13) against their torch references.

Without CUDA the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1, set before the kernel modules
are imported, since triton reads it when a kernel is decorated); on a GPU the same tests run compiled, with
bf16 tolerances for bf16 inputs. Shapes are small: the interpreter runs every program in Python.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from torch import nn  # noqa: E402

from inference_core.quant import formats, linears  # noqa: E402
from inference_core.kernels import triton_kernels as tk  # noqa: E402
from inference_core.engine.paged import PagedBackend, PagedKVPool, SeqSlice  # noqa: E402
from inference_core.kernels.triton_kernels import quant_matmul as qm  # noqa: E402
from inference_core.kernels.triton_kernels.paged_decode import paged_decode  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
N = 70  # not a multiple of BLOCK_N = 32: the last program's columns are masked


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    """Max error relative to the answer's scale: fp32 to rounding, bf16/fp16 to their 8/11-bit mantissas."""
    tol = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tol * want.float().abs().max().item(), (err, want.float().abs().max().item())


def product_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() @ w.float().T).to(x.dtype)


# ------------------------------------------------------------------------------------ quantized matmul

def quantized(fmt: str, w: torch.Tensor, group: int = 128):
    """(kernel call, dequantized weight) for one format, packed exactly as quant/formats.py packs it."""
    if fmt == "int8":
        q, s = formats.quantize_int8(w)
        return (lambda x: qm.per_channel_matmul(x, q, s)), formats.dequantize_int8(q, s)
    if fmt == "fp8":
        q, s = formats.quantize_fp8(w)
        return (lambda x: qm.per_channel_matmul(x, q, s)), formats.dequantize_fp8(q, s)
    if fmt == "int4":
        p, s = formats.quantize_int4(w, group)
        return (lambda x: qm.nibble_matmul(x, p, s, group)), formats.dequantize_int4(p, s, group)
    p, a = formats.quantize_nf4(w, group)
    book = formats.NF4_CODEBOOK.to(w.device)
    return (lambda x: qm.nibble_matmul(x, p, a, group, book)), formats.dequantize_nf4(p, a, group)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 5, 32, 33, 64])
@pytest.mark.parametrize("fmt", ["int8", "fp8", "int4", "nf4"])
def test_quant_matmul_matches_dequantize_then_matmul(fmt, m, dtype):
    gen = torch.Generator().manual_seed(m)
    w = torch.randn(N, 256, generator=gen).to(DEVICE)
    x = torch.randn(m, 256, generator=gen).to(DEVICE, dtype)
    run, w_dq = quantized(fmt, w, 64 if fmt == "nf4" else 128)
    y = run(x)
    assert y.shape == (m, N) and y.dtype == dtype
    close(y, product_reference(x, w_dq), dtype)


@pytest.mark.parametrize("fmt,group", [("int4", 32), ("int4", 64), ("int4", 128), ("nf4", 64)])
def test_nibble_formats_with_a_short_last_group(fmt, group):
    """K = 576 = 4·128 + 64 (SmolLM2's width): the last int4-g128 group is half full; every group size."""
    gen = torch.Generator().manual_seed(group)
    w = torch.randn(N, 576, generator=gen).to(DEVICE)
    x = torch.randn(3, 576, generator=gen).to(DEVICE)
    run, w_dq = quantized(fmt, w, group)
    close(run(x), product_reference(x, w_dq), torch.float32)


def test_nibble_order_is_quant_py_order():
    """One nonzero code per position: the kernel must read value j from byte j's low nibble and j+16 from its
    high nibble (a swapped order would still pass random tests only by luck, not this one)."""
    k = 64
    codes = torch.full((k, k), 8, dtype=torch.uint8)  # int4 code 8 = value 0
    codes[torch.arange(k), torch.arange(k)] = 9  # row n has value +1 at column n only
    packed = formats.pack_nibbles(codes).to(DEVICE)
    scale = torch.ones(k, 1, device=DEVICE)
    x = torch.arange(1, k + 1, dtype=torch.float32, device=DEVICE)[None, :]
    y = qm.nibble_matmul(x, packed, scale, group=64)
    assert torch.equal(y.cpu(), x.cpu())  # y[n] = x[n]


def test_fp8_decodes_every_code():
    """All 254 finite e4m3fn bit patterns (subnormals, ±0, ±448) decode exactly: an identity weight per code."""
    bits = torch.arange(256, dtype=torch.uint8)
    bits = bits[(bits & 0x7F) != 0x7F]  # NaN codes are never stored
    n = len(bits)
    q = torch.zeros(n, n, dtype=torch.uint8)
    q[torch.arange(n), torch.arange(n)] = bits
    q = q.view(torch.float8_e4m3fn).to(DEVICE)
    x = torch.ones(1, n, device=DEVICE)
    y = qm.per_channel_matmul(x, q, torch.ones(n, device=DEVICE))
    assert torch.equal(y[0].cpu(), bits.view(torch.float8_e4m3fn).float())


def reference(x: torch.Tensor, layer) -> torch.Tensor:
    """The torch answer: dequantize, multiply in fp32, add the bias, cast to x's dtype."""
    y = x.float() @ layer.dequantize().float().T
    if layer.bias is not None:
        y = y + layer.bias
    return y.to(x.dtype)


def test_product_dispatches_on_the_layer():
    """`product(x, layer)` + the bias = the layer's own forward, for every format with a kernel; others are refused;
    on a GPU the layer names the Triton kernel it runs."""
    gen = torch.Generator().manual_seed(0)
    lin = nn.Linear(256, N, bias=True).to(DEVICE)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(N, 256, generator=gen))
        lin.bias.copy_(torch.randn(N, generator=gen))
    x = torch.randn(2, 3, 256, generator=gen).to(DEVICE)
    names = {}
    for fmt in ("int8", "fp8", "int4-g128", "int4-g32", "nf4"):
        layer = linears.quantize_linear(lin, fmt)
        y = qm.product(x, layer) + layer.bias
        assert y.shape == (2, 3, N)
        close(y, reference(x, layer), torch.float32)
        close(y, layer(x), torch.float32)
        names[fmt] = layer.kernel
    if DEVICE.type == "cuda":
        assert names == {"int8": "triton-int8", "fp8": "triton-fp8", "int4-g128": "triton-int4-g128",
                         "int4-g32": "triton-int4-g32", "nf4": "triton-nf4"}
    with pytest.raises(TypeError):
        qm.product(x, linears.quantize_linear(lin, "w8a8"))


# ------------------------------------------------------------------------------------- paged decode

def paged_decode_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_tables: torch.Tensor,
                           context_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """The torch answer, one sequence at a time: its blocks in order, SDPA with GQA in fp32, zeros for a
    context_len 0 row."""
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    bs = k.shape[2]
    for row, ctx in enumerate(context_lens.tolist()):
        if ctx == 0:
            continue
        ids = block_tables[row, : -(-ctx // bs)].long()
        ks, vs = (t[ids].transpose(0, 1).flatten(1, 2)[None, :, :ctx].float() for t in (k, v))  # [1, Hkv, ctx, D]
        o = torch.nn.functional.scaled_dot_product_attention(q[row].float()[None, :, None, :], ks, vs, scale=scale,
                                                             enable_gqa=True)
        out[row] = o[0, :, 0]
    return out.to(q.dtype)


def paged_case(block_size: int, head_dim: int, dtype: torch.dtype, lens: list[int], seed: int = 0):
    """A shuffled pool (slots past each context filled with NaN: they must never be read), GQA 6 q / 2 kv
    heads, tables padded with -1 past each sequence's blocks."""
    gen = torch.Generator().manual_seed(seed)
    num_blocks, kv_heads, n_heads = 24, 2, 6
    k = torch.full((num_blocks, kv_heads, block_size, head_dim), float("nan"))
    v = torch.full_like(k, float("nan"))
    max_blocks = max(-(-n // block_size) for n in lens) + 1
    tables = torch.full((len(lens), max_blocks), -1, dtype=torch.int32)
    free = torch.randperm(num_blocks, generator=gen).tolist()
    for row, n in enumerate(lens):
        for i in range(-(-n // block_size)):
            blk = free.pop()
            tables[row, i] = blk
            used = min(block_size, n - i * block_size)
            k[blk, :, :used] = torch.randn(kv_heads, used, head_dim, generator=gen)
            v[blk, :, :used] = torch.randn(kv_heads, used, head_dim, generator=gen)
    q = torch.randn(len(lens), n_heads, head_dim, generator=gen)
    to = dict(device=DEVICE, dtype=dtype)
    return q.to(**to), k.to(**to), v.to(**to), tables.to(DEVICE), torch.tensor(lens, dtype=torch.int32, device=DEVICE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_paged_decode_matches_gather_and_sdpa(dtype):
    """Lengths 1, a full block, one past it, a partial last block, many blocks, and a 0-length padding row."""
    lens = [1, 16, 17, 45, 0, 70]
    q, k, v, tables, ctx = paged_case(16, 64, dtype, lens)
    out = paged_decode(q, k, v, tables, ctx)
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out.float()).all()
    assert not out[4].any()  # the padding row: zeros
    close(out, paged_decode_reference(q, k, v, tables, ctx), dtype)


@pytest.mark.parametrize("splits", [2, 3, 8])
def test_split_k_partials_merge_to_the_same_attention(splits):
    """Flash-decoding: each context cut into 2, 3 or 8 partitions of whole 64-position tiles (so a short one
    leaves the last partitions empty). Lengths end inside a tile, on a tile's edge, inside the second partition,
    at the table's end (8 blocks × 16), and one row is a 0-length padding row whose partials all stay empty."""
    lens = [5, 64, 65, 90, 0, 128]
    q, k, v, tables, ctx = paged_case(16, 64, torch.float32, lens, seed=splits)
    tables = torch.nn.functional.pad(tables, (0, 8 - tables.shape[1]), value=-1)
    out = paged_decode(q, k, v, tables, ctx, splits=splits)
    assert not out[4].any()
    close(out, paged_decode_reference(q, k, v, tables, ctx), torch.float32)
    close(out, paged_decode(q, k, v, tables, ctx, splits=1), torch.float32)


def test_splits_fill_the_machine_and_never_cut_below_a_tile():
    from inference_core.kernels.triton_kernels.paged_decode import BLOCK_N, MAX_SPLITS, num_splits

    cpu = torch.device("cpu")  # counted as 4 SMs: 8 programs wanted
    assert num_splits(1, 2, 8192, cpu) == 4
    assert num_splits(8, 9, 8192, cpu) == 1  # the batch alone gives 72 programs
    assert num_splits(1, 1, 3 * BLOCK_N, cpu) == 3  # 8 wanted, but a partition is at least one tile
    assert num_splits(1, 1, 1, cpu) == 1
    assert 1 <= num_splits(1, 1, 10 ** 6, cpu) <= MAX_SPLITS


def test_paged_decode_odd_block_size_and_head_dim():
    """block_size 5 and head_dim 48 are padded to 8 and 64 inside the kernel and masked."""
    q, k, v, tables, ctx = paged_case(5, 48, torch.float32, [3, 5, 6, 23])
    close(paged_decode(q, k, v, tables, ctx, scale=0.3),
          paged_decode_reference(q, k, v, tables, ctx, scale=0.3), torch.float32)


def test_paged_decode_equals_the_paged_backend():
    """Same numbers as the engine's own decode path: PagedBackend writes the new token's K/V, then attends."""
    gen = torch.Generator().manual_seed(1)
    bs, hkv, hq, d = 4, 2, 6, 32
    pool = PagedKVPool(1, 16, hkv, bs, d, device=DEVICE)
    pool.k.copy_(torch.randn(pool.k.shape, generator=gen))
    pool.v.copy_(torch.randn(pool.v.shape, generator=gen))
    lens = [2, 4, 9, 13]
    blocks = [[3, 0], [7], [1, 9, 5], [2, 4, 6, 8]]
    seqs = [SeqSlice(start=i, n_new=1, context_len=n, blocks=b) for i, (n, b) in enumerate(zip(lens, blocks))]
    backend = PagedBackend(pool)
    backend.begin_step(seqs)
    q = torch.randn(1, hq, len(lens), d, generator=gen).to(DEVICE)
    k_new = torch.randn(1, hkv, len(lens), d, generator=gen).to(DEVICE)
    v_new = torch.randn(1, hkv, len(lens), d, generator=gen).to(DEVICE)
    want = backend.attend(0, q, k_new, v_new)[0].transpose(0, 1)  # [B, Hq, D]; the new K/V are now in the pool
    tables = torch.tensor([b + [0] * (4 - len(b)) for b in blocks], dtype=torch.int32, device=DEVICE)
    got = paged_decode(q[0].transpose(0, 1), pool.k[0], pool.v[0], tables,
                       torch.tensor(lens, dtype=torch.int32, device=DEVICE))
    close(got, want, torch.float32)


@needs_cuda
def test_paged_decode_replays_in_a_cuda_graph():
    """Captured once, replayed after the context lengths change in place: no host sync inside the launch."""
    q, k, v, tables, ctx = paged_case(16, 64, torch.bfloat16, [20, 33, 0, 7])
    out = torch.empty_like(q)
    paged_decode(q, k, v, tables, ctx, out=out)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paged_decode(q, k, v, tables, ctx, out=out)
    ctx.copy_(torch.tensor([19, 32, 0, 6], dtype=torch.int32))  # shorter: slots past the old ends hold NaN
    graph.replay()
    torch.cuda.synchronize()
    close(out, paged_decode_reference(q, k, v, tables, ctx), torch.bfloat16)


# -------------------------------------------------------------------------------------- the package

def test_available_here_and_triton_not_imported_by_the_engine():
    assert tk.available() and tk.why_unavailable() == ""
    code = ("import sys, inference_core, inference_core.kernels.triton_kernels as t; "
            "assert 'triton' not in sys.modules, 'imported triton'; print(t.KERNEL_PAGED_DECODE)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "triton-paged-decode"
