"""The long-context demo: what a fixed KV-cache budget costs the model, as perplexity on the engine's held-out text.

The runner takes the first `context` tokens of `inference_core/data/heldout.txt` (the text the engine's own
perplexity function scores) and scores the window's second half, its last `context // 2` tokens, whose
predictions all have more past than the smallest budgets hold. It measures the full cache once (`policy` "full"),
then, for each budget (half, a quarter, an eighth and a sixteenth of the window), each eviction policy:

- `recent`: the cache keeps only the most recent `budget` tokens (a sliding window);
- `sinks`: the first `sinks` tokens plus the most recent `budget − sinks` (StreamingLLM's attention sinks);
- `h2o`: the most recent half of the budget plus the "heavy hitters", the older tokens that have received the
  most attention so far (H2O). It decides token by token, per layer and key/value head: each new token enters, the
  kept older token with the least accumulated attention leaves, and the query's attention over what is kept adds to
  the sums (its query heads' together, since they share that key/value head's cache).

Eviction lives here, as masks in an attention backend on the reference forward, not in the engine: query i sees
exactly the keys a cache of `budget` tokens would hold when token i is decoded, so every token's hidden state, and
with it every later layer's keys, is the one streaming decoding with that cache would compute.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .attention_variants import window_mask
from .runner import Models

POLICIES = ("recent", "sinks", "h2o")
POLICY_NAMES = {"recent": "Most recent only", "sinks": "Sinks + most recent", "h2o": "H2O: recent + heavy hitters"}
BUDGET_DIVISORS = (2, 4, 8, 16)  # budgets: half, a quarter, an eighth, a sixteenth of the window


@event("context_window")
class ContextWindow(TraceEvent):
    """What is measured: the held-out text's first `n_context` tokens, scored on its last `n_scored`."""

    n_context: int
    n_scored: int  # the window's last tokens whose perplexity is measured (its second half)
    budgets: list[int]  # cache budgets measured, largest first (the full cache is measured before them)
    policies: list[dict]  # {policy, label} in the order measured at each budget
    sink_tokens: int
    tokens: list[str]  # each token's text, for the kept-tokens panel
    rope_theta: float
    trained_positions: int  # the configuration's max_position_embeddings


@event("eviction_point")
class EvictionPoint(TraceEvent):
    """The window's last tokens scored with one policy at one cache budget."""

    policy: str  # full | recent | sinks | h2o
    label: str
    budget: int  # tokens the cache may hold (full: the whole window)
    perplexity: float  # exp(mean negative log-likelihood) of the scored tokens
    mean_nll: float  # nats per scored token
    n_scored: int
    kept: list[float]  # kept[j]: share of the model's layer × key/value-head caches holding token j at the last query


def policy_labels(budget: int, sinks: int) -> dict[str, str]:
    heavy = budget // 2
    return {"full": "Full cache", "recent": f"Most recent {budget} only",
            "sinks": f"Sinks (first {sinks}) + most recent {budget - sinks}",
            "h2o": f"H2O: most recent {budget - heavy} + {heavy} heavy hitters"}


def budgets_for(context: int) -> list[int]:
    return [context // d for d in BUDGET_DIVISORS]


def h2o_keep(scores: np.ndarray, budget: int, group: int) -> np.ndarray:
    """H2O's cache, decided token by token. scores: [query heads, T, T] (q·k / √d, any value above the diagonal);
    query heads h·group … (h+1)·group − 1 share key/value head h. Returns keep [kv heads, T, T]: keep[h, i, j] is
    whether token j is in head h's cache when token i attends (exactly min(i + 1, budget) per row)."""
    n_q, t, _ = scores.shape
    n_kv, heavy = n_q // group, budget // 2
    recent = budget - heavy  # the newest `recent` tokens (the query's own among them) are never evicted
    rows = np.tril(np.ones((t, t), dtype=bool))[None].repeat(n_kv, 0)
    if t <= budget:
        return rows
    # Until the cache is full nothing leaves: the first `budget` queries attend causally to everything.
    causal = np.where(rows[0, :budget, :budget], scores[:, :budget, :budget], -np.inf)
    probs = np.exp(causal - causal.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    acc = np.zeros((n_kv, t))
    acc[:, :budget] = probs.reshape(n_kv, group, budget, budget).sum((1, 2))
    keep = np.zeros((n_kv, t), dtype=bool)
    keep[:, :budget] = True
    heads, kv_of = np.arange(n_kv), np.arange(n_q) // group
    for i in range(budget, t):
        keep[:, i] = True
        oldest_recent = i - recent + 1
        candidates = np.where(keep[:, :oldest_recent], acc[:, :oldest_recent], np.inf)
        keep[heads, candidates.argmin(1)] = False  # the least attended older token leaves (ties: the oldest)
        row = np.where(keep[kv_of, :i + 1], scores[:, i, :i + 1], -np.inf)
        p = np.exp(row - row.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        acc[:, :i + 1] += p.reshape(n_kv, group, i + 1).sum(1)
        rows[:, i] = keep
    return rows


class EvictionBackend:
    """Attends over the whole window each forward (as `NoCache`), each query seeing only what the policy's cache
    of `budget` tokens would hold; keeps, per layer and key/value head, what the last query saw."""

    def __init__(self, policy: str, budget: int, sinks: int) -> None:
        self.policy, self.budget, self.sinks = policy, budget, sinks
        self.kept_sum = None  # [T] summed over layers and key/value heads
        self.caches = 0

    def masks(self, q, k):
        """Boolean [key/value heads or 1, T, T] for this layer."""
        import torch

        t = q.shape[2]
        if self.policy == "full" or self.budget >= t:
            return window_mask(t, t, 0, q.device)[None]
        if self.policy == "recent":
            return window_mask(t, self.budget, 0, q.device)[None]
        if self.policy == "sinks":
            return window_mask(t, self.budget - self.sinks, self.sinks, q.device)[None]
        group = q.shape[1] // k.shape[1]
        k_per_q = k.repeat_interleave(group, dim=1)
        scores = (q[0].float() @ k_per_q[0].float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.from_numpy(h2o_keep(scores.numpy(), self.budget, group)).to(q.device)

    def attend(self, layer, q, k, v):
        import torch.nn.functional as F

        mask = self.masks(q, k)
        n_kv = k.shape[1]
        last = mask[:, -1].float().expand(n_kv, -1).sum(0)
        self.kept_sum = last if self.kept_sum is None else self.kept_sum + last
        self.caches += n_kv
        group = q.shape[1] // n_kv
        attn_mask = mask.repeat_interleave(group, dim=0)[None] if mask.shape[0] > 1 else mask
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)

    def advance(self, n_tokens: int) -> None:
        pass

    def kept(self) -> list[float]:
        return [round(float(x), 3) for x in self.kept_sum / self.caches]


def score(engine, ids: list[int], n_scored: int, backend: EvictionBackend) -> float:
    """Mean negative log-likelihood (nats) of the last `n_scored` tokens of `ids` under `backend`."""
    import torch

    tokens = torch.tensor([ids], device=engine.device)
    with torch.inference_mode():
        hidden = engine.model.hidden_states(tokens, torch.arange(len(ids), device=engine.device), backend)
        # Only the scored rows go through the vocabulary head: position i predicts token i + 1.
        logits = engine.model.compute_logits(hidden[:, len(ids) - n_scored - 1:-1]).float()[0]
    logp = torch.log_softmax(logits, dim=-1)
    targets = tokens[0, len(ids) - n_scored:]
    return float(-logp.gather(1, targets[:, None]).mean())


def check_params(params: dict) -> None:
    smallest = int(params["context"]) // BUDGET_DIVISORS[-1]
    if int(params["sinks"]) >= smallest:
        raise ValueError(f"sinks must be fewer than the smallest budget, {smallest} tokens of a "
                         f"{params['context']}-token window")


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    from inference_core.quant.perplexity import heldout_ids

    params = SPEC.with_defaults(params)
    check_params(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    context, sinks = int(params["context"]), int(params["sinks"])
    ids = heldout_ids(engine.tokenizer, context)
    if len(ids) < context:
        raise ValueError(f"the held-out text has only {len(ids)} tokens")
    n_scored, budgets = context // 2, budgets_for(context)
    yield ContextWindow(
        n_context=context, n_scored=n_scored, budgets=budgets, sink_tokens=sinks,
        policies=[{"policy": p, "label": POLICY_NAMES[p]} for p in POLICIES],
        tokens=[engine.tokenizer.token_text(t) for t in ids], rope_theta=float(engine.config.rope_theta),
        trained_positions=int(engine.config.max_seq_len)).to_dict()
    for policy, budget in [("full", context)] + [(p, b) for b in budgets for p in POLICIES]:
        if should_stop is not None and should_stop():
            return
        backend = EvictionBackend(policy, budget, sinks)
        nll = score(engine, ids, n_scored, backend)
        yield EvictionPoint(policy=policy, label=policy_labels(budget, sinks)[policy], budget=budget,
                            perplexity=round(math.exp(nll), 4), mean_nll=round(nll, 6), n_scored=n_scored,
                            kept=backend.kept()).to_dict()


SPEC = DemoSpec(
    name="long-context",
    title="A fixed cache budget: perplexity when old tokens must leave",
    description=(
        "Score the last half of a window of the engine's held-out text with the full KV cache, then with caches "
        "of half, a quarter, an eighth and a sixteenth of the window, evicting by recency, by recency with "
        "attention sinks, or by accumulated attention (H2O), and see which tokens each policy kept."
    ),
    runner=run,
    check=check_params,
    module="js/demos/long-context.js",
    params={
        "context": ParamSpec("int", default=512, label="Window (tokens of held-out text)", min_value=128,
                             max_value=1024),
        "sinks": ParamSpec("int", default=4, label="Sink tokens kept", min_value=1, max_value=16),
    },
    presets=(
        {"label": "512-token window", "context": 512, "sinks": 4},
        {"label": "256-token window", "context": 256, "sinks": 4},
    ),
    try_next=(
        "Set “Sink tokens kept” to 1 and run again: one sink already wins back most of what the window alone "
        "loses, because the heads park their weight on the very first token.",
        "Choose the “256-token window” preset: its smallest cache is 16 tokens, and there keeping only the most "
        "recent tokens multiplies perplexity several times over, far more than the sinks or H2O do.",
    ),
)
