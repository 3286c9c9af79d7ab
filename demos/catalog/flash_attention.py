"""The FlashAttention demo: naive vs tiled attention on the real q/k/v of one layer for the student's prompt.

A capturing attention backend runs the real model up to the chosen layer and keeps that layer's post-RoPE
q, k, v; both implementations then attend over them. Emits `attention_compare` (agreement, timings, the
bytes of the N×N matrix vs one tile), the two timed in alternating repeats (`comparison_sample`…, `comparison`,
see `comparison.py`), `attention_memory_curve` (how those grow with N) and `flash_tile_walk` (the online softmax's
running max, running sum and output accumulator after every tile, for the chosen head and, when they fit the same
size budget, every head of the layer, for the page's step timeline).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec, max_prompt_tokens_limit
from .comparison import Side, compare
from .events import AttentionCompare, AttentionMemoryCurve, FlashTileWalk
from .runner import Models

if TYPE_CHECKING:
    import torch

CURVE_N = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
CURVE_BYTES_PER_VALUE = 2  # fp16/bf16, what a GPU serving stack would use
# About 60 tokens: with tiles of 16 that is a 4 × 4 grid of tiles, 6 of them skipped by the causal mask
# (a prompt shorter than one tile would be a single tile: nothing saved, "Ratio 1.0×").
DEFAULT_PROMPT = (
    "The quick brown fox jumps over the lazy dog because it was bored of sleeping in the sun all afternoon. "
    "The dog, who had seen this trick many times before, did not even open its eyes, and the fox, a little "
    "disappointed, trotted off into the woods to look for someone more impressed."
)


class CaptureBackend:
    """Attends like `NoCache` (whole sequence each forward) and keeps one layer's q, k, v."""

    def __init__(self, layer: int) -> None:
        self.layer = layer
        self.q = self.k = self.v = None

    def attend(self, layer, q, k, v):
        from inference_core.model.kv_cache import sdpa

        if layer == self.layer:
            self.q, self.k, self.v = q.clone(), k.clone(), v.clone()
        return sdpa(q, k, v)

    def advance(self, n_tokens: int) -> None:
        pass


def capture_qkv(engine, token_ids: list[int], layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run only the first layer + 1 blocks (later layers cannot change this layer's inputs)."""
    import torch

    backend = CaptureBackend(layer)
    tokens = torch.tensor([token_ids], device=engine.device)
    with torch.inference_mode():
        engine.model(tokens, torch.arange(len(token_ids), device=engine.device), backend, last_only=True,
                     n_layers=layer + 1)
    return backend.q, backend.k, backend.v


# The tile walk's size budget (values per row: m, l, rescale and WALK_ACC_DIMS of acc): the largest run the spec
# allows (512 tokens in tiles of 4: 8,256 tiles) would be megabytes of trace and a timeline too long to scrub, so
# a long walk keeps evenly spaced query tiles (the last always) and says which.
WALK_MAX_ROWS = 4096  # Σ over recorded tiles of the query rows in the tile
WALK_MAX_TILES = 512
WALK_ACC_DIMS = 8
WALK_HEAD = 0
# Every head of the layer travels in the event when all their walks together stay within one walk's row budget
# (the trace is never larger than one long walk: a short prompt carries all heads, the student switches after the
# run); otherwise only the head the run's `head` setting chose.
WALK_ALL_HEADS_MAX_ROWS = WALK_MAX_ROWS


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def causal_tiles(n_tokens: int, block_q: int, block_k: int, q_block: int) -> int:
    """Key tiles a causal pass computes for query tile `q_block` (the others lie wholly after its last query)."""
    last_query = min((q_block + 1) * block_q, n_tokens) - 1
    return last_query // block_k + 1


def walked_query_blocks(n_tokens: int, block_q: int, block_k: int) -> list[int]:
    """Every query tile when the walk fits the budget, else as many evenly spaced ones as fit, ending at the last."""
    n_q = -(-n_tokens // block_q)

    def cost(blocks):
        tiles = [causal_tiles(n_tokens, block_q, block_k, b) for b in blocks]
        rows = sum(t * (min((b + 1) * block_q, n_tokens) - b * block_q) for t, b in zip(tiles, blocks))
        return sum(tiles), rows

    for count in range(n_q, 0, -1):
        blocks = sorted({round(i * (n_q - 1) / max(count - 1, 1)) for i in range(count)} | {n_q - 1})
        tiles, rows = cost(blocks)
        if tiles <= WALK_MAX_TILES and rows <= WALK_MAX_ROWS:
            return blocks
    return [n_q - 1]


def head_tiles(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int, head: int,
               blocks: list[int]) -> list[dict]:
    """The causal online softmax of `tiled_attention` for one query head over query tiles `blocks`, recording the
    state after each tile.

    Same invariant: after key tiles 0..j of a query tile, m = the largest score per row so far, l = Σ exp(s − m),
    acc = Σ exp(s − m) · v; a larger max first rescales l and acc by exp(m_old − m_new). acc / l after the last
    tile is the attention output (tested against naive attention)."""
    import torch

    n = q.shape[2]
    kv_head = head // (q.shape[1] // k.shape[1])
    qh = q[0, head].float() / q.shape[-1] ** 0.5
    kh, vh = k[0, kv_head].float(), v[0, kv_head].float()
    dims = min(WALK_ACC_DIMS, vh.shape[-1])
    tiles = []
    for qb in blocks:
        qs, qe = qb * block_q, min((qb + 1) * block_q, n)
        m = torch.full((qe - qs, 1), float("-inf"))
        l = torch.zeros((qe - qs, 1))
        acc = torch.zeros((qe - qs, vh.shape[-1]))
        for kb in range(causal_tiles(n, block_q, block_k, qb)):
            ks, ke = kb * block_k, min((kb + 1) * block_k, n)
            s = qh[qs:qe] @ kh[ks:ke].T
            mask = torch.arange(ks, ke).unsqueeze(0) > torch.arange(qs, qe).unsqueeze(1)
            s = s.masked_fill(mask, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            rescale = torch.exp(m - m_new)  # 0 on the first key tile: nothing accumulated yet
            l = l * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ vh[ks:ke]
            m = m_new
            tiles.append({"q_block": qb, "k_block": kb, "m": [_sig(x) for x in m[:, 0].tolist()],
                          "l": [_sig(x) for x in l[:, 0].tolist()],
                          "rescale": [_sig(x) for x in rescale[:, 0].tolist()],
                          "acc": [[_sig(x) for x in row] for row in acc[:, :dims].tolist()]})
    return tiles


def walk_rows(tiles: list[dict]) -> int:
    return sum(len(t["m"]) for t in tiles)


def tile_walk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int, block_k: int,
              head: int = WALK_HEAD) -> FlashTileWalk:
    """The walk of query head `head` (`head`, `tiles`) and, when every head's walk together fits
    WALK_ALL_HEADS_MAX_ROWS, all heads in `heads`, in head order; otherwise `heads` lists the chosen head only.
    The chosen head's entry is `{head}` alone (its tiles are `tiles`: the trace never holds a walk twice); the
    others' are `{head, tiles}`. Every head walks the same tiles in the same order."""
    n, n_heads = q.shape[2], q.shape[1]
    blocks = walked_query_blocks(n, block_q, block_k)
    tiles = head_tiles(q, k, v, block_q, block_k, head, blocks)
    walked = [head]
    if walk_rows(tiles) * n_heads <= WALK_ALL_HEADS_MAX_ROWS:
        walked = list(range(n_heads))
    heads = [{"head": h} if h == head else {"head": h, "tiles": head_tiles(q, k, v, block_q, block_k, h, blocks)}
             for h in walked]
    return FlashTileWalk(head=head, n_tokens=n, block_q=block_q, block_k=block_k, n_q_blocks=-(-n // block_q),
                         n_k_blocks=-(-n // block_k), acc_dims=min(WALK_ACC_DIMS, v.shape[-1]), q_blocks=blocks,
                         tiles=tiles, n_heads=n_heads, heads=heads)


NAIVE, TILED = "naive", "tiled"
FLASH_REPEATS = 5  # a few milliseconds each: more repeats cost nothing


def _timed(fn) -> Callable[[], tuple[float, object]]:
    def once():
        t0 = time.perf_counter()
        result = fn()
        return time.perf_counter() - t0, result
    return once


def lesson_claim(n_tokens: int) -> str:
    """The lesson: the Python tile loop is slower than the naive version for a short prompt, and wins from a few
    hundred tokens. In between it makes no claim."""
    if n_tokens < 128:
        return NAIVE
    return TILED if n_tokens >= 512 else ""


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    import torch  # the worker only: the web process loads no torch

    from .tiled_attention import hbm_traffic, naive_attention, tiled_attention
    from inference_core.model.kv_cache import sdpa

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    cfg = engine.config
    layer = min(int(params["layer"]), cfg.n_layers - 1)
    head = min(int(params["head"]), cfg.n_heads - 1)
    block = int(params["block_size"])
    ids = engine.encode_prompt(params["prompt"], chat=False)
    q, k, v = capture_qkv(engine, ids, layer)
    if should_stop is not None and should_stop():
        return
    results: dict[str, object] = {}

    def side(label, fn):
        once = _timed(fn)

        def measure():
            with torch.inference_mode():
                seconds, results[label] = once()
            return seconds, counters[label]
        return Side(label, measure)

    counters: dict[str, dict] = {}
    # The bytes and tiles are known before the timing: one untimed pass of each fills them in.
    with torch.inference_mode():
        _, score_bytes = naive_attention(q, k, v, causal=True)
        _, stats = tiled_attention(q, k, v, causal=True, block_q=block, block_k=block)
    counters[NAIVE] = {"score bytes held": score_bytes}
    counters[TILED] = {"score bytes held": stats.tile_bytes, "tiles computed": stats.tiles_computed,
                       "tiles skipped (masked)": stats.tiles_skipped}
    samples = list(compare(side(NAIVE, lambda: naive_attention(q, k, v, causal=True)),
                           side(TILED, lambda: tiled_attention(q, k, v, causal=True, block_q=block, block_k=block)),
                           metric="time of one attention pass over the layer's q, k, v",
                           claim=lesson_claim(len(ids)), repeats=FLASH_REPEATS))
    comparison = samples[-1]
    medians = {s["label"]: s["median_s"] for s in comparison["sides"]}
    naive, _ = results[NAIVE]
    tiled, _ = results[TILED]
    with torch.inference_mode():
        ref = sdpa(q, k, v)
        # The last query row's weights, recomputed for display (one row: cheap).
        k_rep = k.repeat_interleave(cfg.n_heads // cfg.n_kv_heads, dim=1)
        last = torch.softmax((q[:, :, -1:] @ k_rep.transpose(-1, -2)) / cfg.head_dim ** 0.5, dim=-1)
    yield AttentionCompare(
        layer=layer, n_tokens=len(ids), tokens=[engine.tokenizer.token_text(t) for t in ids],
        n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
        dtype=str(q.dtype).removeprefix("torch."), block_q=block, block_k=block,
        max_abs_diff=float((tiled - naive).abs().max()), max_abs_diff_sdpa=float((tiled - ref).abs().max()),
        naive_time_s=medians[NAIVE], tiled_time_s=medians[TILED], naive_score_bytes=score_bytes,
        tile_bytes=stats.tile_bytes, tiles_computed=stats.tiles_computed, tiles_skipped=stats.tiles_skipped,
        last_row_weights=[float(x) for x in last[0, :, 0].mean(dim=0)],
    ).to_dict()
    with torch.inference_mode():
        yield tile_walk(q, k, v, block, block, head).to_dict()
    yield from samples
    curve_block = 128  # a typical GPU tile edge for head_dim 64
    traffic = [hbm_traffic(n, cfg.head_dim, CURVE_BYTES_PER_VALUE, curve_block) for n in CURVE_N]
    yield AttentionMemoryCurve(
        head_dim=cfg.head_dim, bytes_per_value=CURVE_BYTES_PER_VALUE, block_q=curve_block, block_k=curve_block,
        n=CURVE_N, naive_score_bytes=[n * n * CURVE_BYTES_PER_VALUE for n in CURVE_N],
        tile_bytes=curve_block * curve_block * CURVE_BYTES_PER_VALUE,
        naive_traffic_bytes=[t[0] for t in traffic], tiled_traffic_bytes=[t[1] for t in traffic],
    ).to_dict()


SPEC = DemoSpec(
    name="flash-attention",
    title="Tiled attention vs the N×N matrix",
    description=(
        "Capture one layer's real queries, keys and values for your prompt, then compute attention twice: "
        "naively with the whole score matrix, and tile by tile with an online softmax."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/flash-attention.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=4000,
                            max_tokens=max_prompt_tokens_limit),
        "layer": ParamSpec("int", default=0, label="Layer", min_value=0, max_value=29),
        # SmolLM2-135M's 9 query heads per layer (a larger model's extra heads are clamped, as its layers are)
        "head": ParamSpec("int", default=WALK_HEAD, label="Head", min_value=0, max_value=8,
                          help="the query head whose online softmax the step timeline walks; a short run "
                               "carries every head of the layer, to switch after the run"),
        "block_size": ParamSpec("int", default=16, label="Tile size (queries and keys)", min_value=4,
                                max_value=128),
    },
    try_next=(
        "Set the tile size to 64 or more: one tile then covers the whole prompt, the ratio drops to 1.0× and "
        "nothing is skipped; that single tile is the naive N × N matrix again.",
        "Set the tile size to 4: the memory held shrinks further, but the Python loop now runs many more tiny "
        "tiles, so the tiled time on this CPU grows.",
    ),
)
