"""Drafts: guess the next k tokens cheaply (p = the draft's distribution, q = the target's). `NgramDraft` looks the
context's last n tokens up earlier in it (no model: p one-hot); `ModelDraft` runs a model sharing the target's
vocabulary with its own KV cache (the target's first L layers, an int8 copy, or another model). Invariant for model
drafts: `cached` lists the tokens whose K/V sit in the draft's positions [0, len(cached)) (docs/engine-notes.md)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..engine.model_runner import runner_for
from ..engine.paged import PagedSequence
from ..model.sampling import SamplingParams, probabilities
from ..model.transformer import Transformer

DRAFT_KINDS = ("ngram", "self-early-exit", "self-int8")  # by name; or another model sharing the tokenizer


@dataclass
class Proposal:
    """k (or fewer) guessed tokens. `p[i]` is the draft's distribution that `tokens[i]` was drawn from,
    or None for a deterministic draft (then p is one-hot on each token)."""
    tokens: list[int]
    p: torch.Tensor | None  # [len(tokens), vocab] float32, or None
    time_s: float = 0.0
    n_forwards: int = 0  # draft model forward passes spent (0 for n-gram)
    catch_up_s: float = 0.0  # of time_s: a first forward that re-fed more than the last round's tail (the prompt,
    # or what a pause skipped), which steady drafting does not repeat


class Draft(Protocol):
    """begin (a new sequence of at most `capacity` tokens), propose (up to k tokens after `context_ids`, the whole
    committed sequence), close (release the caches); a draft that keeps nothing (n-gram) inherits begin and close."""
    name: str

    def begin(self, prompt_ids: list[int], capacity: int, sampling: SamplingParams,
              generator: torch.Generator | None) -> None: ...
    def propose(self, context_ids: list[int], k: int) -> Proposal: ...
    def close(self) -> None: ...


@dataclass
class NgramDraft(Draft):
    """Prompt-lookup draft: match the longest suffix n-gram (n_max … n_min) at its most recent earlier
    occurrence and propose the tokens that followed it. Free to run; only useful on repetitive text."""
    n_max: int = 3
    n_min: int = 1
    name: str = "ngram"

    def propose(self, context_ids: list[int], k: int) -> Proposal:
        t0 = time.perf_counter()
        tokens = ngram_lookup(context_ids, k, self.n_max, self.n_min)
        return Proposal(tokens, None, time.perf_counter() - t0, 0)


def ngram_lookup(context: list[int], k: int, n_max: int = 3, n_min: int = 1) -> list[int]:
    """Up to k tokens that followed the most recent earlier occurrence of the context's last n tokens,
    trying the longest n first. Empty when nothing matches (the round then decodes one token plainly)."""
    size = len(context)
    if k <= 0:
        return []
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        suffix = context[size - n:]
        # most recent start j < size − n whose n tokens equal the suffix and that has a continuation
        for j in range(size - n - 1, -1, -1):
            if context[j:j + n] == suffix:
                return context[j + n:j + n + k]
    return []


@dataclass
class ModelDraft:
    """A model draft with its own KV cache. `n_layers` < the model's depth makes it early-exit: only the
    first layers run, then the final norm and the (shared) output head — the same weights as the target."""
    model: Transformer
    n_layers: int | None = None
    name: str = "model"
    cache: PagedSequence | None = field(default=None, init=False)
    cached: list[int] = field(default_factory=list, init=False)
    sampling: SamplingParams = field(default_factory=SamplingParams, init=False)
    generator: torch.Generator | None = field(default=None, init=False)

    @property
    def depth(self) -> int:
        return self.n_layers or self.model.config.n_layers

    def begin(self, prompt_ids, capacity, sampling, generator) -> None:
        self.close()
        self.cache = runner_for(self.model).new_sequence(capacity, n_layers=self.depth)
        self.cached = []
        self.sampling, self.generator = sampling, generator

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    @torch.inference_mode()
    def propose(self, context_ids: list[int], k: int) -> Proposal:
        assert self.cache is not None, "call begin() first"
        t0 = time.perf_counter()
        common = 0
        limit = min(len(self.cached), len(context_ids) - 1)  # always re-feed at least the last token
        while common < limit and self.cached[common] == context_ids[common]:
            common += 1
        if common < len(self.cached):  # roll back past the common prefix (rejected guesses, a re-sync)
            self.cache.truncate(common)
            del self.cached[common:]
        feed = context_ids[common:]
        tokens: list[int] = []
        dists: list[torch.Tensor] = []
        catch_up = 0.0
        for i in range(k):  # one forward per guess
            logits = runner_for(self.model).forward_sequence(feed, self.cache, n_layers=self.n_layers)
            self.cached.extend(feed)
            p = probabilities(logits[-1], self.sampling)
            if i == 0 and len(feed) > 2:  # a steady round re-feeds 1 or 2 tokens (after a full acceptance)
                catch_up = time.perf_counter() - t0
            greedy = self.sampling.greedy
            token = int(p.argmax()) if greedy else int(torch.multinomial(p.cpu(), 1, generator=self.generator))
            tokens.append(token)
            dists.append(p)
            feed = [token]
        return Proposal(tokens, torch.stack(dists) if dists else None, time.perf_counter() - t0, len(tokens), catch_up)
