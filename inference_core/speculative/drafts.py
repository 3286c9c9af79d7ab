"""Draft proposers for speculative decoding, behind one small protocol.

A draft guesses the next k tokens cheaply; the target model then checks them all in one forward
(`decode.py`). Notation follows the issue and Chen et al. 2023: **p is the draft's distribution,
q the target's** (Leviathan et al. 2023 use the opposite letters: their M_p is the target).

Kinds:
  * `NgramDraft`    — prompt lookup: find the last n tokens earlier in the context, propose what
                      followed. No model, no distribution: p is one-hot on each proposed token.
  * `ModelDraft`    — any Llama-family model sharing the target's vocabulary, with its own KV cache:
                      the early-exit self-draft (first L layers of the target + the shared head) or a
                      quantized copy of the target.

Invariant for model drafts: `self.cached` lists exactly the tokens whose K/V sit in positions
[0, len(cached)) of the draft's cache. `propose` re-syncs to the context by the longest common prefix,
so after a partial acceptance the rejected guesses are rolled back (`PagedSequence.truncate`) before anything
new is written; `rollback(length)` does the same explicitly.
"""
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


class Draft(Protocol):
    name: str

    def begin(self, prompt_ids: list[int], capacity: int, sampling: SamplingParams,
              generator: torch.Generator | None) -> None:
        """Prepare for a new sequence of at most `capacity` tokens (allocate caches, remember sampling)."""
        ...

    def propose(self, context_ids: list[int], k: int) -> Proposal:
        """Guess up to k tokens that follow `context_ids` (the whole committed sequence)."""
        ...

    def rollback(self, length: int) -> None:
        """Forget any state beyond the first `length` committed tokens."""
        ...

    def close(self) -> None:
        """The sequence is over: release caches (a model draft's pool goes back to its runner)."""
        ...


@dataclass
class NgramDraft:
    """Prompt-lookup draft: match the longest suffix n-gram (n_max … n_min) at its most recent earlier
    occurrence and propose the tokens that followed it. Free to run; only useful on repetitive text."""

    n_max: int = 3
    n_min: int = 1
    name: str = "ngram"

    def begin(self, prompt_ids, capacity, sampling, generator) -> None:
        pass

    def propose(self, context_ids: list[int], k: int) -> Proposal:
        t0 = time.perf_counter()
        tokens = ngram_lookup(context_ids, k, self.n_max, self.n_min)
        return Proposal(tokens, None, time.perf_counter() - t0, 0)

    def rollback(self, length: int) -> None:
        pass

    def close(self) -> None:
        pass


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

    def rollback(self, length: int) -> None:
        if self.cache is not None and length < len(self.cached):
            self.cache.truncate(length)
            del self.cached[length:]

    def _forward(self, tokens: list[int]) -> torch.Tensor:
        logits = runner_for(self.model).forward_sequence(tokens, self.cache, n_layers=self.n_layers)
        self.cached.extend(tokens)
        return logits[-1]

    @torch.inference_mode()
    def propose(self, context_ids: list[int], k: int) -> Proposal:
        assert self.cache is not None, "call begin() first"
        t0 = time.perf_counter()
        common = 0
        limit = min(len(self.cached), len(context_ids) - 1)  # always re-feed at least the last token
        while common < limit and self.cached[common] == context_ids[common]:
            common += 1
        self.rollback(common)
        feed = context_ids[common:]
        tokens: list[int] = []
        dists: list[torch.Tensor] = []
        forwards = 0
        for i in range(k):
            logits = self._forward(feed)
            forwards += 1
            p = probabilities(logits, self.sampling)
            if self.sampling.greedy:
                token = int(p.argmax())
            else:
                token = int(torch.multinomial(p.cpu(), 1, generator=self.generator))
            tokens.append(token)
            dists.append(p)
            feed = [token]
        p_all = torch.stack(dists) if dists else None
        return Proposal(tokens, p_all, time.perf_counter() - t0, forwards)
