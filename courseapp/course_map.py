"""The course map on the index: one request's life, from prompt to the GPU, with each module placed on the part
of that life it explains.

`STAGES` is the picture, in the order a request meets it; `MODULE_STAGE` places modules on it by slug. A module
that is not in `MODULE_STAGE` (one an instructor adds later) goes to the "other" stage, so the map never breaks
and never loses a module. The map only arranges what the index view already computed: it takes the index's
module cards (visible modules only, so drafts appear for staff alone, with each card's completion) and makes no
query of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

OTHER = "other"


@dataclass(frozen=True)
class Stage:
    key: str
    title: str
    text: str
    lever: bool = False  # a way to make steps cheaper, drawn beside the path rather than on it


STAGES: tuple[Stage, ...] = (
    Stage("prompt", "Prompt → tokens",
          "The prompt is split into tokens; each passes through a stack of transformer blocks."),
    Stage("prefill", "Prefill",
          "All prompt tokens in one parallel forward pass: one wide matrix multiply, limited by arithmetic."),
    Stage("kv-cache", "KV cache",
          "Every layer keeps the keys and values of every token, so later steps never recompute them."),
    Stage("decode", "Decode steps",
          "One token per forward pass, each step reading all the weights and the cache: limited by memory."),
    Stage("batch", "Batch of requests",
          "Many requests share each step; continuous batching, a paged KV cache and a prefix cache keep it full."),
    Stage("gpu", "GPU memory and bandwidth",
          "Memory decides how many requests fit; bandwidth decides how fast each step can read them."),
    Stage("cheaper", "Ways to make each step cheaper",
          "Fewer bytes per weight, several tokens per pass, attention without the N×N matrix.", lever=True),
    Stage(OTHER, "Also in the course",
          "Reference pages and modules that are not placed on the map yet."),
)

# slug → stage key. Modules missing here land on OTHER.
MODULE_STAGE: dict[str, str] = {
    "primer": "prompt",
    "overview": "prompt",
    "prefill-decode": "prefill",
    "kv-cache": "kv-cache",
    "attention-variants": "kv-cache",  # how a model's attention design sets the cache's bytes per token
    "long-context": "kv-cache",  # what a growing cache costs, and what a fixed budget should evict
    "sampling": "decode",  # every decode step ends by choosing its token
    "structured-output": "decode",  # a grammar's mask on that choice, at every step
    "paged-attention": "batch",
    "continuous-batching": "batch",
    "prefix-caching": "batch",
    "serving": "batch",
    "serving-metrics": "batch",  # the batch a server runs, measured from outside: latency percentiles, goodput
    "gpu-bandwidth": "gpu",
    "model-parallelism": "gpu",  # when one device's memory or bandwidth is not enough: split the model
    "token-cost": "gpu",  # the machine's price per hour over the tokens per second it makes
    "quantization": "cheaper",
    "local-ecosystem": "cheaper",  # the quantized file a laptop runs (GGUF), and the engines that run it
    "speculative-decoding": "cheaper",
    "flash-attention": "cheaper",
}

# A stage with no module of its own names the lesson that explains it (plain text: each module is linked once).
SEE_ALSO: dict[str, str] = {"decode": "prefill-decode"}


def stage_for(slug: str) -> str:
    key = MODULE_STAGE.get(slug, OTHER)
    return key if any(s.key == key for s in STAGES) else OTHER


@dataclass
class MapStage:
    stage: Stage
    number: int | None  # position on the request's path; None for the lever and "other"
    cards: list = field(default_factory=list)  # the index's ModuleCards, in course order
    see_also: object | None = None  # a Module explained elsewhere on the map
    leads_on: bool = False  # a request goes on from here to the next numbered stage (an arrow is drawn)

    @property
    def key(self) -> str:
        return self.stage.key

    @property
    def completed_count(self) -> int:
        return sum(1 for card in self.cards if card.completed)


def build_course_map(cards: Iterable) -> list[MapStage]:
    """Stages in request order, each holding the cards of the modules it explains. Empty stages stay on the
    path (a request still goes through them) except "other", shown only when a module lands there."""
    cards = list(cards)
    path = [s for s in STAGES if not s.lever and s.key != OTHER]
    stages = [MapStage(stage=s, number=path.index(s) + 1 if s in path else None) for s in STAGES]
    for s in stages:
        s.leads_on = s.number is not None and s.number < len(path)
    by_key = {s.key: s for s in stages}
    by_slug = {card.module.slug: card.module for card in cards}
    for card in cards:
        by_key[stage_for(card.module.slug)].cards.append(card)
    for key, slug in SEE_ALSO.items():
        if key in by_key and not by_key[key].cards:
            by_key[key].see_also = by_slug.get(slug)
    return [s for s in stages if s.key != OTHER or s.cards]
