"""The attention demo (the primer): the real model's attention weights for the student's own prompt.

The model runs its reference forward (`inference_core.model.transformer.Transformer`, whole prompt, no cache) up to the chosen
layer, through an attention backend that keeps that layer's queries and keys after RoPE (the same capture the
FlashAttention demo uses). The weights of one head are then the softmax of its query against every key, scaled by
1/√head_dim, with the causal mask: row i is how much token i attends to tokens 0…i, and it sums to 1. Emits one
`attention_weights` event: the chosen head in full, and every head of the layer (lower triangle, 4 decimals: about
30 kB at 32 tokens) so the picture can switch head without a new run, and the chosen head's walk (`head_walk`: its
Q, K, V, scores before the softmax and output, their first dimensions, about 12 kB at 32 tokens) for the primer's
step-by-step view.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec
from .events import AttentionWeights
from .flash_attention import capture_qkv
from .runner import Models

if TYPE_CHECKING:
    import torch

MAX_PROMPT_TOKENS = 32  # a heatmap of 32 × 32 cells still reads on a phone
DEFAULT_PROMPT = "The cat sat on the mat because it was tired."


def head_weights(q: torch.Tensor, k: torch.Tensor, head: int) -> torch.Tensor:
    """[T, T] causal softmax weights of query head `head`, from q [1, Hq, T, D] and k [1, Hkv, T, D] (after RoPE).
    Grouped-query attention: query head h reads key head h // (Hq / Hkv)."""
    import torch

    n_heads, n_kv_heads, t, head_dim = q.shape[1], k.shape[1], q.shape[2], q.shape[3]
    kv_head = head // (n_heads // n_kv_heads)
    scores = (q[0, head].float() @ k[0, kv_head].float().T) / math.sqrt(head_dim)
    later = torch.ones(t, t, dtype=torch.bool, device=scores.device).triu(1)  # key after query: masked
    return torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)


WALK_VALUE_DIMS = 12  # dimensions of v and the output the walk carries (of head_dim): the picture's columns
WALK_QK_DIMS = 4  # of q and k: the text quotes these


def _sig(rows, dims: int | None = None) -> list[list[float]]:
    return [[float(f"{x:.3g}") for x in row[:dims]] for row in rows.tolist()]


def head_walk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head: int, weights: torch.Tensor) -> dict:
    """One head's steps from the captured tensors: its queries, the keys and values it reads (its key/value head),
    the scaled scores before the softmax (lower triangle, from all head_dim dimensions) and the output, weights × V;
    q, k, v and the output cut to their first dimensions (the event stays under 60 kB at 32 tokens)."""
    n_heads, n_kv_heads, head_dim = q.shape[1], k.shape[1], q.shape[3]
    kv_head = head // (n_heads // n_kv_heads)
    qh, kh, vh = q[0, head].float(), k[0, kv_head].float(), v[0, kv_head].float()
    scores = (qh @ kh.T) / math.sqrt(head_dim)
    return {"q": _sig(qh, WALK_QK_DIMS), "k": _sig(kh, WALK_QK_DIMS), "v": _sig(vh, WALK_VALUE_DIMS),
            "scores": [[round(x, 2) for x in row[: i + 1]] for i, row in enumerate(scores.tolist())], "output": _sig(weights @ vh, WALK_VALUE_DIMS)}


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    cfg = engine.config
    layer, head = int(params["layer"]), int(params["head"])
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer must be in [0, {cfg.n_layers})")
    if not 0 <= head < cfg.n_heads:
        raise ValueError(f"head must be in [0, {cfg.n_heads})")
    ids = engine.encode_prompt(params["prompt"], chat=False)[:MAX_PROMPT_TOKENS]
    q, k, v = capture_qkv(engine, ids, layer)  # the reference forward, stopped after `layer`
    if should_stop is not None and should_stop():
        return
    weights = head_weights(q, k, head)
    every = [head_weights(q, k, h).cpu() for h in range(cfg.n_heads)]
    yield AttentionWeights(
        layer=layer, head=head, kv_head=head // (cfg.n_heads // cfg.n_kv_heads), n_layers=cfg.n_layers,
        n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, token_ids=list(ids),
        tokens=[engine.tokenizer.token_text(t) for t in ids],
        weights=[[round(float(w), 6) for w in row] for row in weights.cpu()],
        all_heads=[[[round(float(w), 4) for w in row[: i + 1]] for i, row in enumerate(hw)] for hw in every],
        walk=head_walk(q, k, v, head, weights.float()),
    ).to_dict()


SPEC = DemoSpec(
    name="attention",
    title="Attention weights for your prompt",
    description=(
        "Run the real model on a short prompt and see, for one head of one layer, how much each token attends to "
        "each earlier token: the softmax of its query against every key, with the causal mask."
    ),
    runner=run,
    module="js/demos/attention.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=400,
                            max_tokens=MAX_PROMPT_TOKENS),
        "layer": ParamSpec("int", default=16, label="Layer", min_value=0, max_value=29),
        "head": ParamSpec("int", default=0, label="Head", min_value=0, max_value=8),
    },
    presets=(
        {"label": "The tired cat", "prompt": DEFAULT_PROMPT},
        {"label": "Story opening", "prompt": "Once upon a time, in a small village by the sea, there lived an old fisherman."},
        {"label": "Capitals", "prompt": "The capital of France is Paris, and the capital of Italy is"},
    ),
    try_next=(
        "Set “Layer” to 13 and “Head” to 8: the row of “ it” puts most of its weight on “ cat”, the word it refers to.",
        "Set “Layer” to 18 and “Head” to 7: almost every row puts nearly all its weight on the first token, a "
        "pattern called an attention sink.",
    ),
)
