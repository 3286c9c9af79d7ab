"""The FlashAttention demo: naive vs tiled attention on the real q/k/v of one layer for the student's prompt.

A capturing attention backend runs the real model up to the chosen layer and keeps that layer's post-RoPE
q, k, v; both implementations then attend over them. Emits `attention_compare` (agreement, timings, the
bytes of the N×N matrix vs one tile) and `attention_memory_curve` (how those grow with N).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import torch

from ..config import DEFAULT_MODEL
from ..course_trace import AttentionCompare, AttentionMemoryCurve
from ..engine import load_engine
from ..flash_attention import hbm_traffic, naive_attention, tiled_attention
from ..kv_cache import sdpa

CURVE_N = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
CURVE_BYTES_PER_VALUE = 2  # fp16/bf16, what a GPU serving stack would use


class CaptureBackend:
    """Attends like `NoCache` (whole sequence each forward) and keeps one layer's q, k, v."""

    def __init__(self, layer: int) -> None:
        self.layer = layer
        self.q = self.k = self.v = None

    def attend(self, layer, q, k, v):
        if layer == self.layer:
            self.q, self.k, self.v = q.clone(), k.clone(), v.clone()
        return sdpa(q, k, v)

    def advance(self, n_tokens: int) -> None:
        pass


def capture_qkv(engine, token_ids: list[int], layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run only the first layer + 1 blocks (later layers cannot change this layer's inputs)."""
    backend = CaptureBackend(layer)
    tokens = torch.tensor([token_ids], device=engine.device)
    with torch.inference_mode():
        engine.model(tokens, torch.arange(len(token_ids), device=engine.device), backend, last_only=True,
                     n_layers=layer + 1)
    return backend.q, backend.k, backend.v


def _timed(fn, repeats: int = 3):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    engine = load_engine(params.get("model", DEFAULT_MODEL))
    cfg = engine.config
    layer = min(int(params.get("layer", 0)), cfg.n_layers - 1)
    block = int(params.get("block_size", 16))
    ids = engine.encode_prompt(params["prompt"], chat=False)
    q, k, v = capture_qkv(engine, ids, layer)
    if should_stop is not None and should_stop():
        return
    with torch.inference_mode():
        (naive, score_bytes), naive_s = _timed(lambda: naive_attention(q, k, v, causal=True))
        (tiled, stats), tiled_s = _timed(lambda: tiled_attention(q, k, v, causal=True, block_q=block, block_k=block))
        ref = sdpa(q, k, v)
        # The last query row's weights, recomputed for display (one row: cheap).
        k_rep = k.repeat_interleave(cfg.n_heads // cfg.n_kv_heads, dim=1)
        last = torch.softmax((q[:, :, -1:] @ k_rep.transpose(-1, -2)) / cfg.head_dim ** 0.5, dim=-1)
    yield AttentionCompare(
        layer=layer, n_tokens=len(ids), tokens=[engine.tokenizer.token_text(t) for t in ids],
        n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
        dtype=str(q.dtype).removeprefix("torch."), block_q=block, block_k=block,
        max_abs_diff=float((tiled - naive).abs().max()), max_abs_diff_sdpa=float((tiled - ref).abs().max()),
        naive_time_s=naive_s, tiled_time_s=tiled_s, naive_score_bytes=score_bytes, tile_bytes=stats.tile_bytes,
        tiles_computed=stats.tiles_computed, tiles_skipped=stats.tiles_skipped,
        last_row_weights=[float(x) for x in last[0, :, 0].mean(dim=0)],
    ).to_dict()
    curve_block = 128  # a typical GPU tile edge for head_dim 64
    traffic = [hbm_traffic(n, cfg.head_dim, CURVE_BYTES_PER_VALUE, curve_block) for n in CURVE_N]
    yield AttentionMemoryCurve(
        head_dim=cfg.head_dim, bytes_per_value=CURVE_BYTES_PER_VALUE, block_q=curve_block, block_k=curve_block,
        n=CURVE_N, naive_score_bytes=[n * n * CURVE_BYTES_PER_VALUE for n in CURVE_N],
        tile_bytes=curve_block * curve_block * CURVE_BYTES_PER_VALUE,
        naive_traffic_bytes=[t[0] for t in traffic], tiled_traffic_bytes=[t[1] for t in traffic],
    ).to_dict()
