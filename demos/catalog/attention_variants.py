"""The attention-variants demo: what sharing keys and values across query heads, or forgetting old ones, costs this
model, measured on the student's own prompt.

SmolLM2-135M was trained with grouped-query attention: 9 query heads read 3 key/value heads. The runner first
shows that sharing in one layer (`kv_groups`: each query head's attention row for the prompt's last token, and how
alike the 3 key/value heads' keys are). Then it runs the whole prompt through the reference forward once per
variant, with an attention backend that changes only what the cache would hold, and compares every position's
next-token distribution with the model as trained (`kv_variant`):

- `gqa`: as trained (the reference: KL 0, every top token kept);
- `mqa`: one key/value head per layer, the mean of the 3 (how a GQA checkpoint is converted, before any
  re-training): a third of the cache;
- `window`: every query sees only the last `window` tokens (sliding-window attention): the cache stops growing;
- `sinks`: the same window plus the prompt's first 4 tokens, which many heads park their attention on (the
  "attention sinks" StreamingLLM keeps).

Bytes per token count the cache as this engine stores it on the CPU (fp32: 2 × layers × kv heads × head_dim × 4);
the `kv_budget` event sets the same formula to real model configurations (bf16), MLA's compressed latent included.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .runner import Models

MAX_PROMPT_TOKENS = 64
DEFAULT_PROMPT = ("The old lighthouse keeper climbed the stairs every night to light the lamp. One night the lamp "
                  "would not light, so the keeper")
VARIANTS = ("gqa", "mqa", "window", "sinks")
SINK_TOKENS = 4  # StreamingLLM keeps the first 4 tokens beside the window

# Real configurations (their model cards / config.json), cache in bf16 (2 bytes a value). MLA caches one compressed
# latent (kv_lora_rank 512) plus a shared 64-dim RoPE key per token per layer, not keys and values per head.
REAL_CONFIGS = (
    {"model": "SmolLM2-135M (GQA, 3 KV heads)", "layers": 30, "values_per_layer": 2 * 3 * 64},
    {"model": "Llama 3 8B (GQA, 8 KV heads)", "layers": 32, "values_per_layer": 2 * 8 * 128},
    {"model": "Llama 3 8B as MHA (32 KV heads)", "layers": 32, "values_per_layer": 2 * 32 * 128},
    {"model": "Llama 3 8B as MQA (1 KV head)", "layers": 32, "values_per_layer": 2 * 1 * 128},
    {"model": "Llama 3 70B (GQA, 8 KV heads)", "layers": 80, "values_per_layer": 2 * 8 * 128},
    {"model": "DeepSeek-V3 (MLA latent 512 + 64)", "layers": 61, "values_per_layer": 512 + 64},
)


@event("kv_groups")
class KvGroups(TraceEvent):
    """One layer's grouped-query attention: which key/value head each query head reads, and what each reads."""

    layer: int
    n_heads: int
    n_kv_heads: int
    tokens: list[str]
    kv_head_of: list[int]  # kv_head_of[h]: the key/value head query head h reads (h ÷ (n_heads / n_kv_heads))
    last_rows: list[list[float]]  # last_rows[h][j]: how much the prompt's last token attends to token j in head h
    key_similarity: list[list[float]]  # mean cosine similarity of two key/value heads' keys over the prompt


@event("kv_variant")
class KvVariant(TraceEvent):
    """The whole prompt under one attention variant, against the model as trained, position by position."""

    variant: str  # gqa | mqa | window | sinks
    label: str
    kv_heads: int  # key/value heads the cache holds per layer
    window: int | None  # sliding window (recent tokens a query sees), None: all
    sink_tokens: int  # first tokens every query also sees (0: none)
    n_tokens: int
    kv_bytes_per_token: int  # fp32, as this engine caches on the CPU
    kv_bytes_for_prompt: int  # what the cache holds after the prompt (a window holds at most `window` tokens)
    mean_kl: float  # mean over positions of KL(trained ‖ variant) of the next-token distribution, nats
    top1_agreement: float  # share of positions whose most likely next token is unchanged
    kl_per_position: list[float]


@event("kv_budget")
class KvBudget(TraceEvent):
    """Cache bytes per token for real configurations: 2 (K and V) × layers × kv heads × head_dim × bytes."""

    bytes_per_value: int
    configs: list[dict]  # {model, layers, values_per_layer, bytes_per_token}


class VariantBackend:
    """Attends over the whole sequence each forward (as `NoCache`), after changing what a cache would hold:
    `mqa` averages the key/value heads into one, `window` masks keys `window` or more tokens back, `sinks` too
    but for the first SINK_TOKENS."""

    def __init__(self, variant: str, window: int, keep_layer: int | None = None) -> None:
        self.variant, self.window, self.keep_layer = variant, window, keep_layer
        self.q = self.k = None

    def attend(self, layer, q, k, v):
        import torch.nn.functional as F

        if layer == self.keep_layer:
            self.q, self.k = q.clone(), k.clone()
        if self.variant == "mqa":
            k, v = k.mean(dim=1, keepdim=True), v.mean(dim=1, keepdim=True)
        if self.variant not in ("window", "sinks"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        sinks = SINK_TOKENS if self.variant == "sinks" else 0
        mask = window_mask(q.shape[2], self.window, sinks, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    def advance(self, n_tokens: int) -> None:
        pass


def window_mask(n: int, window: int, sinks: int = 0, device=None):
    """Boolean [n, n]: query i sees key j ≤ i when j is one of the last `window` tokens (i − window < j) or one of
    the first `sinks`."""
    import torch

    rows = torch.arange(n, device=device).unsqueeze(1)
    cols = torch.arange(n, device=device).unsqueeze(0)
    return (cols <= rows) & ((cols > rows - window) | (cols < sinks))


def _forward(engine, ids: list[int], backend: VariantBackend):
    import torch

    tokens = torch.tensor([ids], device=engine.device)
    with torch.inference_mode():
        return engine.model(tokens, torch.arange(len(ids), device=engine.device), backend).float()[0]


def _groups(engine, ids, tokens, layer, backend) -> dict:
    import torch

    cfg = engine.config
    group = cfg.n_heads // cfg.n_kv_heads
    q, k = backend.q[0].float(), backend.k[0].float()  # [Hq, T, D], [Hkv, T, D]
    kv_of = [h // group for h in range(cfg.n_heads)]
    rows = [torch.softmax(q[h, -1] @ k[kv_of[h]].T / math.sqrt(cfg.head_dim), dim=-1) for h in range(cfg.n_heads)]
    unit = torch.nn.functional.normalize(k, dim=-1)
    similarity = [[round(float((unit[a] * unit[b]).sum(-1).mean()), 4) for b in range(cfg.n_kv_heads)]
                  for a in range(cfg.n_kv_heads)]
    return KvGroups(layer=layer, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, tokens=tokens, kv_head_of=kv_of,
                    last_rows=[[round(float(w), 4) for w in row] for row in rows],
                    key_similarity=similarity).to_dict()


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    import torch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    cfg = engine.config
    layer, window = int(params["layer"]), int(params["window"])
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer must be in [0, {cfg.n_layers})")
    ids = engine.encode_prompt(params["prompt"], chat=False)[:MAX_PROMPT_TOKENS]
    tokens = [engine.tokenizer.token_text(t) for t in ids]
    trained_backend = VariantBackend("gqa", window, keep_layer=layer)
    trained = torch.log_softmax(_forward(engine, ids, trained_backend), dim=-1)
    yield _groups(engine, ids, tokens, layer, trained_backend)
    bytes_per_value = 4  # the engine's CPU cache is fp32
    labels = {"gqa": f"GQA as trained ({cfg.n_kv_heads} KV heads)", "mqa": "MQA: the KV heads averaged into 1",
              "window": f"Sliding window of {window} tokens",
              "sinks": f"Window of {window} + the first {SINK_TOKENS} tokens (sinks)"}
    for variant in VARIANTS:
        if should_stop is not None and should_stop():
            return
        logp = trained if variant == "gqa" else torch.log_softmax(_forward(engine, ids, VariantBackend(variant, window)), -1)
        kl = (trained.exp() * (trained - logp)).sum(-1).clamp_min(0)
        kv_heads = 1 if variant == "mqa" else cfg.n_kv_heads
        per_token = 2 * cfg.n_layers * kv_heads * cfg.head_dim * bytes_per_value
        sinks = SINK_TOKENS if variant == "sinks" else 0
        windowed = variant in ("window", "sinks")
        held = min(len(ids), window + sinks) if windowed else len(ids)
        yield KvVariant(
            variant=variant, label=labels[variant], kv_heads=kv_heads, window=window if windowed else None,
            sink_tokens=sinks,
            n_tokens=len(ids), kv_bytes_per_token=per_token, kv_bytes_for_prompt=per_token * held,
            mean_kl=round(float(kl.mean()), 5),
            top1_agreement=round(float((logp.argmax(-1) == trained.argmax(-1)).float().mean()), 4),
            kl_per_position=[round(float(x), 4) for x in kl],
        ).to_dict()
    yield KvBudget(bytes_per_value=2, configs=[
        {**c, "bytes_per_token": c["layers"] * c["values_per_layer"] * 2} for c in REAL_CONFIGS]).to_dict()


SPEC = DemoSpec(
    name="attention-variants",
    title="Sharing keys and values: what GQA, MQA and a sliding window cost",
    description=(
        "See which key/value head each of the model's 9 query heads reads, then run your prompt with the heads "
        "averaged into one (MQA) and with a sliding window, and measure how far each moves the model's next-token "
        "distribution against the bytes of cache it saves."
    ),
    runner=run,
    module="js/demos/attention-variants.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=600,
                            max_tokens=MAX_PROMPT_TOKENS),
        "layer": ParamSpec("int", default=15, label="Layer shown", min_value=0, max_value=29),
        "window": ParamSpec("int", default=8, label="Sliding window (tokens)", min_value=1, max_value=MAX_PROMPT_TOKENS),
    },
    presets=(
        {"label": "The lighthouse", "prompt": DEFAULT_PROMPT},
        {"label": "A list to continue", "prompt": "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday,"},
    ),
    try_next=(
        "Set “Sliding window (tokens)” to 32 and run again: once the window holds most of the prompt, the "
        "distribution barely moves, because few queries reach further back than that.",
        "Keep “Sliding window (tokens)” at 8 and step from the window alone to the window with the first 4 tokens: "
        "4 more cached tokens move the distribution far less, because many heads weigh the first token most.",
    ),
)

