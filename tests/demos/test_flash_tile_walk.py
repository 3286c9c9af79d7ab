"""The FlashAttention demo's tile walk (`flash_tile_walk`): the running statistics it records are the online
softmax's, so acc / l after a query tile's last key tile is the attention output; a long walk stays within its
size budget and says which query tiles it kept."""
from __future__ import annotations

import json

import pytest
import torch

import demos.catalog.events  # noqa: F401 (registers the course's events)
from demos.catalog.flash_attention import (WALK_ALL_HEADS_MAX_ROWS, WALK_MAX_ROWS, WALK_MAX_TILES, causal_tiles, tile_walk,
                                           walked_query_blocks)
from inference_core.engine.trace import validate_event
from demos.catalog.tiled_attention import naive_attention


def qkv(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    # 9 query heads on 3 KV heads, as SmolLM2's GQA; a spread of scores so maxima rise along the walk
    return (3 * torch.randn(1, 9, n, 64, generator=g), torch.randn(1, 3, n, 64, generator=g),
            torch.randn(1, 3, n, 64, generator=g))


@pytest.mark.parametrize("n, block", [(62, 16), (40, 7), (5, 4), (3, 128)])
def test_the_walk_ends_at_the_attention_output_and_covers_every_computed_tile(n, block):
    q, k, v = qkv(n)
    walk = tile_walk(q, k, v, block, block, head=4)
    out, _ = naive_attention(q, k, v, causal=True)
    assert walk.q_blocks == list(range(-(-n // block)))  # small: every query tile
    assert [(t["q_block"], t["k_block"]) for t in walk.tiles] == [
        (qb, kb) for qb in walk.q_blocks for kb in range(causal_tiles(n, block, block, qb))]
    for i, tile in enumerate(walk.tiles):
        rows = len(tile["m"])
        assert rows == min(block, n - tile["q_block"] * block) == len(tile["l"]) == len(tile["acc"])
        assert all(len(row) == walk.acc_dims == 8 for row in tile["acc"])
        if tile["k_block"] == 0:
            assert tile["rescale"] == [0.0] * rows  # nothing accumulated yet
        else:
            prev = walk.tiles[i - 1]
            # the factor is exp(m_old − m_new): 1 where the max held, below 1 where it rose
            for r, m_old, m_new in zip(tile["rescale"], prev["m"], tile["m"]):
                assert 0 < r <= 1 and (r == 1) == (m_new == m_old)
                assert r == pytest.approx(torch.exp(torch.tensor(m_old - m_new)).item(), rel=2e-3, abs=1e-6)
        last = i == len(walk.tiles) - 1 or walk.tiles[i + 1]["q_block"] != tile["q_block"]
        if last:
            start = tile["q_block"] * block
            got = torch.tensor(tile["acc"]) / torch.tensor(tile["l"]).unsqueeze(1)
            torch.testing.assert_close(got, out[0, 4, start:start + rows, :8], rtol=2e-3, atol=2e-3)
    validate_event(json.loads(json.dumps(walk.to_dict())))


def test_the_largest_run_keeps_evenly_spaced_query_tiles_within_the_budget():
    for block in (4, 8, 16, 128):
        blocks = walked_query_blocks(512, block, block)
        n_q = -(-512 // block)
        tiles = sum(causal_tiles(512, block, block, b) for b in blocks)
        rows = sum(causal_tiles(512, block, block, b) * block for b in blocks)
        assert blocks[-1] == n_q - 1 and blocks == sorted(set(blocks))
        assert tiles <= WALK_MAX_TILES and rows <= WALK_MAX_ROWS
        assert len(blocks) >= 4, block  # still a walk down the grid, not one row
    q, k, v = qkv(512, seed=1)
    walk = tile_walk(q, k, v, 4, 4)
    assert walk.n_q_blocks == 128 and walk.q_blocks == walked_query_blocks(512, 4, 4)
    assert len(json.dumps(walk.to_dict())) < 400_000  # a trace a browser loads at once


def test_a_small_walk_carries_every_head_each_ending_at_its_own_output():
    q, k, v = qkv(40)
    walk = tile_walk(q, k, v, 8, 8, head=4)
    out, _ = naive_attention(q, k, v, causal=True)
    assert walk.n_heads == 9 and [h["head"] for h in walk.heads] == list(range(9))
    assert walk.heads[4] == {"head": 4}  # the chosen head's walk is the old fields' `tiles`, not held twice
    for h in [{"head": 4, "tiles": walk.tiles}] + walk.heads[:4] + walk.heads[5:]:
        assert [(t["q_block"], t["k_block"]) for t in h["tiles"]] == [(t["q_block"], t["k_block"]) for t in walk.tiles]
        last = {t["q_block"]: t for t in h["tiles"]}  # each query tile's state after its last key tile
        for qb, tile in last.items():
            got = torch.tensor(tile["acc"]) / torch.tensor(tile["l"]).unsqueeze(1)
            torch.testing.assert_close(got, out[0, h["head"], qb * 8:qb * 8 + len(tile["m"]), :8], rtol=2e-3, atol=2e-3)
    assert len({json.dumps(h["tiles"]) for h in walk.heads if h["head"] != 4} | {json.dumps(walk.tiles)}) == 9
    validate_event(json.loads(json.dumps(walk.to_dict())))


def test_a_long_walk_carries_only_the_chosen_head_within_one_walks_budget():
    q, k, v = qkv(512, seed=2)
    for block in (4, 16, 128):
        walk = tile_walk(q, k, v, block, block, head=7)
        assert walk.heads == [{"head": 7}]  # the chosen head alone, its tiles in `tiles`
        assert sum(len(t["m"]) for t in walk.tiles) <= WALK_ALL_HEADS_MAX_ROWS
        assert len(json.dumps(walk.to_dict())) < 400_000  # no larger than the one-head walk was


@pytest.mark.model
def test_the_runner_walks_every_head_of_the_real_layer_and_the_chosen_one_first(loaded_models):
    """On SmolLM2's real q/k/v: the default prompt's walk carries all 9 heads of the layer, `head` is the one the
    settings chose, and every head's acc / l after a query tile's last key tile is that head's attention output."""
    from demos.catalog.flash_attention import capture_qkv, run
    from demos.registry import validate
    from inference_core import DEFAULT_MODEL, load_engine

    params = validate("flash-attention", {"layer": 2, "head": 5})
    events = []
    for ev in run(params, models=loaded_models):
        events.append(ev)
        if ev["type"] == "flash_tile_walk":
            break
    compare, walk = events
    validate_event(json.loads(json.dumps(walk)))
    assert walk["head"] == 5 and walk["n_heads"] == compare["n_heads"] == 9
    assert [h["head"] for h in walk["heads"]] == list(range(9)) and walk["heads"][5] == {"head": 5}
    print(f"\nflash_tile_walk: {compare['n_tokens']} tokens in tiles of {walk['block_q']}, all 9 heads: "
          f"{len(json.dumps(walk)):,} bytes")
    engine = load_engine(params.get("model", DEFAULT_MODEL))
    q, k, v = capture_qkv(engine, engine.encode_prompt(params["prompt"], chat=False), 2)
    out, _ = naive_attention(q.float(), k.float(), v.float(), causal=True)
    b = walk["block_q"]
    for h in walk["heads"]:
        last = {t["q_block"]: t for t in h.get("tiles", walk["tiles"])}
        for qb, tile in last.items():
            got = torch.tensor(tile["acc"]) / torch.tensor(tile["l"]).unsqueeze(1)
            torch.testing.assert_close(got, out[0, h["head"], qb * b:qb * b + len(tile["m"]), :8], rtol=5e-3, atol=5e-3)


def test_the_spec_limits_the_head_to_the_models_query_heads():
    from demos.registry import validate
    from demos.spec import DemoParamError

    assert validate("flash-attention", {})["head"] == 0
    assert validate("flash-attention", {"head": 8})["head"] == 8
    for bad in (-1, 9, "two"):
        with pytest.raises(DemoParamError):
            validate("flash-attention", {"head": bad})
