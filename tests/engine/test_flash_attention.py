"""Tiled online-softmax attention equals the naive N×N attention and PyTorch's SDPA."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from demos.catalog.tiled_attention import hbm_traffic, naive_attention, tiled_attention


def _qkv(b, hq, hkv, tq, tk, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, tq, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, hkv, tk, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, tk, d, generator=g, dtype=torch.float64)
    return q, k, v


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (9, 3), (4, 1)])  # MHA, GQA, SmolLM2's 3:1, MQA
@pytest.mark.parametrize("blocks", [(16, 16), (7, 5), (64, 64)])  # uneven tiles and one tile for all
def test_tiled_equals_naive_and_sdpa(causal, hq, hkv, blocks):
    q, k, v = _qkv(2, hq, hkv, 37, 37, 16)
    tiled, stats = tiled_attention(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])
    naive, score_bytes = naive_attention(q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(tiled, naive, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(tiled, ref, rtol=1e-10, atol=1e-10)
    assert score_bytes == 2 * hq * 37 * 37 * 8
    assert stats.tile_bytes == 2 * hq * min(blocks[0], 37) * min(blocks[1], 37) * 8  # same batch and heads


def test_causal_with_fewer_queries_than_keys_matches_decode_masking():
    """Queries are the last Tq positions (a chunk of decode / chunked prefill)."""
    q, k, v = _qkv(1, 6, 2, 5, 29, 8, seed=1)
    tiled, stats = tiled_attention(q, k, v, causal=True, block_q=2, block_k=4)
    naive, _ = naive_attention(q, k, v, causal=True)
    rows = torch.arange(5).unsqueeze(1) + 24
    mask = torch.arange(29).unsqueeze(0) <= rows
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(tiled, naive, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(tiled, ref, rtol=1e-10, atol=1e-10)
    assert stats.tiles_skipped == 2  # query blocks at positions 24-25 and 26-27 never load key 28's block


def test_causal_skips_tiles_above_the_diagonal():
    q, k, v = _qkv(1, 1, 1, 64, 64, 8)
    _, stats = tiled_attention(q, k, v, causal=True, block_q=16, block_k=16)
    assert (stats.tiles_computed, stats.tiles_skipped) == (10, 6)  # 4×4 tiles: 4+3+2+1 computed


def test_float32_agrees_closely_with_large_logits():
    """The online max subtraction keeps exp() finite even when raw scores are huge."""
    q, k, v = (t.float() for t in _qkv(1, 2, 2, 50, 50, 32, seed=3))
    q = q * 40
    tiled, _ = tiled_attention(q, k, v, block_q=8, block_k=8)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.isfinite(tiled).all()
    torch.testing.assert_close(tiled, ref, rtol=1e-4, atol=1e-4)


def test_traffic_model():
    naive, tiled = hbm_traffic(1024, 64, 2, 128)
    assert naive == (4 * 1024 * 1024 + 4 * 1024 * 64) * 2
    assert tiled == (2 * 1024 * 64 + 2 * 1024 * 64 * 8) * 2
    # The naive term grows as N², the tiled one as N²·d/block_q: for d = 64, block 128, half as steep per N².
    n2 = hbm_traffic(2048, 64, 2, 128)
    assert n2[0] / naive > 3.8 and n2[1] / tiled > 3.5


@pytest.mark.model
def test_real_layer_qkv_agree(engine, loaded_models):
    """On the real model's q/k/v (GQA 9:3) the tiled pass matches naive attention and the engine's SDPA."""
    from demos.catalog.flash_attention import run
    from inference_core.engine.trace import validate_event

    events = list(run({"prompt": "The capital of France is Paris, and the capital of Italy is", "layer": 3,
                       "block_size": 4}, models=loaded_models))
    for ev in events:
        validate_event(ev)
    compare, walk, *timing, curve = events
    assert walk["type"] == "flash_tile_walk"  # the tile walk the demo's timeline steps through
    assert [e["type"] for e in timing] == ["comparison_sample"] * 10 + ["comparison"]  # 5 alternating repeats each
    assert timing[-1]["sides"][0]["median_s"] == compare["naive_time_s"]
    assert compare["n_heads"] == 9 and compare["n_kv_heads"] == 3 and compare["tiles_skipped"] > 0
    assert compare["max_abs_diff"] < 1e-5 and compare["max_abs_diff_sdpa"] < 1e-5
    assert compare["naive_score_bytes"] == 9 * compare["n_tokens"] ** 2 * 4
    assert abs(sum(compare["last_row_weights"]) - 1) < 1e-5
    assert curve["naive_score_bytes"][0] == 256 * 256 * 2
