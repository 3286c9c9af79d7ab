"""Speculative decoding (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318).

Notation, as in the issue and Chen et al.: **p = the draft's distribution, q = the target's**.
(Leviathan et al. write the same algorithm with the letters swapped: their M_p is the target model and
M_q the approximation. Every trace field says which model it belongs to: `p_draft`, `q_target`.)

One round, with the committed sequence x_1..x_n whose last token is not yet in the target's cache:
  1. the draft proposes d_1..d_k, each d_i drawn from p_i (deterministic drafts: p_i is one-hot);
  2. the target runs ONE forward over [x_n, d_1..d_k] (k+1 positions) giving q_1..q_{k+1};
  3. for i = 1..k: accept d_i with probability min(1, q_i(d_i) / p_i(d_i)); at the first rejection,
     emit a sample from the residual norm(max(0, q_i − p_i)) and stop;
  4. if all k were accepted, emit a bonus token from q_{k+1}.
Each emitted token is then distributed exactly as q (the target alone, with the same temperature /
top-k / top-p). Greedy (temperature 0) makes p and q one-hot: accept while d_i == argmax q_i, and the
residual is the target's argmax — so greedy output equals plain greedy decoding token for token.

Cache invariant between rounds: the target's sequence (a `PagedSequence`: blocks of its own pool, verified
through the same `ModelRunner` as every other step) holds K/V for every committed token except the last
(length == len(seq) − 1). After a round that accepted m of k guesses, positions of the k − m rejected
guesses are dropped with `PagedSequence.truncate`, which frees blocks past the new end; the draft re-syncs
itself the same way (drafts.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from ..engine.model_runner import runner_for
from ..engine.trace import TraceEvent
from ..model.sampling import SamplingParams, probabilities
from ..model.transformer import Transformer
from .acceptance import accept
from .drafts import Draft, ModelDraft, Proposal
from .events import NOTATION, SpecFinished, SpecRound, SpecStarted


# ---------------------------------------------------------------- metrics

@dataclass
class SpecStats:
    k: int
    n_prompt_tokens: int = 0
    n_generated: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    drafted_at: list[int] = field(default_factory=list)  # per draft position i: rounds that drafted ≥ i+1 tokens
    accepted_at: list[int] = field(default_factory=list)  # … and in which position i was accepted
    target_forwards: int = 0  # verify passes (prefill not counted; plain decoding makes 1 per token)
    draft_forwards: int = 0
    prefill_time_s: float = 0.0
    draft_time_s: float = 0.0
    verify_time_s: float = 0.0
    total_time_s: float = 0.0

    def __post_init__(self) -> None:
        self.drafted_at = [0] * self.k
        self.accepted_at = [0] * self.k

    def record(self, n_drafted: int, n_accepted: int, n_draft_forwards: int, draft_s: float, verify_s: float) -> None:
        self.rounds += 1
        self.target_forwards += 1
        self.drafted += n_drafted
        self.accepted += n_accepted
        self.draft_forwards += n_draft_forwards
        self.draft_time_s += draft_s
        self.verify_time_s += verify_s
        for i in range(n_drafted):
            self.drafted_at[i] += 1
            if i < n_accepted:
                self.accepted_at[i] += 1

    def metrics(self) -> dict:
        """JSON-able summary. `mean_accept_length` = tokens per verify pass = 1 + accepted / rounds."""
        verify_ms = 1000 * self.verify_time_s / max(self.target_forwards, 1)
        draft_ms = 1000 * self.draft_time_s / max(self.draft_forwards, 1) if self.draft_forwards else 0.0
        return {
            "k": self.k, "n_prompt_tokens": self.n_prompt_tokens, "n_generated": self.n_generated,
            "rounds": self.rounds, "drafted": self.drafted, "accepted": self.accepted,
            "acceptance_rate": self.accepted / self.drafted if self.drafted else 0.0,
            "acceptance_by_position": [a / d if d else None for a, d in zip(self.accepted_at, self.drafted_at)],
            "drafted_by_position": list(self.drafted_at),
            "mean_accept_length": 1 + self.accepted / self.rounds if self.rounds else 0.0,
            "target_forwards": self.target_forwards,
            "target_forwards_per_token": self.target_forwards / self.n_generated if self.n_generated else 0.0,
            "draft_forwards": self.draft_forwards,
            "draft_ms_per_forward": draft_ms, "verify_ms_per_forward": verify_ms,
            "draft_cost_ratio": draft_ms / verify_ms if verify_ms else 0.0,
            "prefill_time_s": self.prefill_time_s, "draft_time_s": self.draft_time_s,
            "verify_time_s": self.verify_time_s, "total_time_s": self.total_time_s,
            "tokens_per_s": self.n_generated / self.total_time_s if self.total_time_s else 0.0,
        }


# ---------------------------------------------------------------- the round loop

@dataclass(frozen=True)
class SpecParams(SamplingParams):
    k: int = 4  # guesses per round


class SpeculativeRun:
    """State of one speculative generation: the target's cache, the committed sequence, the stats.

    Invariant between rounds: `cache.length == len(seq) − 1` (the last committed token is fed with the
    next round's guesses), and the draft's own state covers at most `seq`.
    """

    def __init__(self, model: Transformer, draft: Draft, prompt_ids: list[int], params: SpecParams,
                 token_text: Callable[[int], str] = str) -> None:
        cfg = model.config
        if not prompt_ids:
            raise ValueError("prompt is empty")
        if params.k < 0:
            raise ValueError("k must be ≥ 0")
        capacity = len(prompt_ids) + params.max_new_tokens + params.k + 1
        if capacity > cfg.max_seq_len:
            raise ValueError(f"prompt + new tokens + k = {capacity} exceeds the model's {cfg.max_seq_len} positions")
        self.model, self.draft, self.params, self.token_text = model, draft, params, token_text
        self.device = model.tok_embeddings.weight.device
        self.sampling = params
        self.generator = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
        self.runner = runner_for(model)
        self.cache = self.runner.new_sequence(capacity)  # the target's K/V on blocks of its own
        self.seq = list(prompt_ids)
        self.out: list[int] = []
        self.stats = SpecStats(params.k, n_prompt_tokens=len(prompt_ids))
        self.finish = "length"
        self.rounds = 0
        self.t_start = time.perf_counter()
        draft.begin(list(prompt_ids), capacity, self.sampling, self.generator)

    def close(self) -> None:
        """Return the target's and the draft's pools to their runners (with the CUDA graphs captured over them)."""
        self.cache.close()
        self.draft.close()

    @property
    def done(self) -> bool:
        return self.finish == "eos" or len(self.out) >= self.params.max_new_tokens

    @torch.inference_mode()
    def prefill(self) -> None:
        """All prompt tokens but the last: that one is fed with the first round's guesses."""
        self.t_start = time.perf_counter()
        if len(self.seq) > 1:
            self.runner.forward_sequence(self.seq[:-1], self.cache)
        self.stats.prefill_time_s = time.perf_counter() - self.t_start

    @torch.inference_mode()
    def round(self) -> SpecRound:
        """Draft up to k guesses, verify them in one target forward, accept, roll back the rest."""
        params, cfg, seq = self.params, self.model.config, self.seq
        k = min(params.k, params.max_new_tokens - len(self.out) - 1)  # never verify past the last token
        t0 = time.perf_counter()
        prop: Proposal = self.draft.propose(seq, k) if k > 0 else Proposal([], None)
        drafted = prop.tokens[:k]
        p = prop.p[: len(drafted)] if prop.p is not None else None
        t1 = time.perf_counter()
        start = len(seq) - 1
        assert self.cache.length == start, "target cache out of sync"
        feed = [seq[-1]] + drafted
        logits = self.runner.forward_sequence(feed, self.cache, all_rows=True)  # one multi-position step
        # greedy needs only argmax: skip the softmax (accept() uses one-hot values)
        q = logits.float() if self.sampling.greedy else probabilities(logits, self.sampling)
        verdict = accept(drafted, p, q, self.sampling.greedy, self.generator)
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()  # not the device: another thread may capture
        t2 = time.perf_counter()
        m = verdict.n_accepted
        self.cache.truncate(start + 1 + m)  # keep x_n and the accepted guesses; free the rejected ones' blocks
        emitted = drafted[:m] + [verdict.next_token]
        if params.stop_at_eos and cfg.eos_token_id in emitted:
            emitted = emitted[: emitted.index(cfg.eos_token_id) + 1]
            self.finish = "eos"
        emitted = emitted[: params.max_new_tokens - len(self.out)]
        seq.extend(emitted)
        self.out.extend(emitted)
        stats = self.stats
        stats.record(len(drafted), m, prop.n_forwards, t1 - t0, t2 - t1)
        stats.n_generated = len(self.out)
        stats.total_time_s = time.perf_counter() - self.t_start
        text = self.token_text
        ev = SpecRound(
            round=self.rounds, position=start + 1, drafted=drafted, drafted_text=[text(t) for t in drafted],
            p_draft=verdict.p_draft, q_target=verdict.q_target, accept_prob=verdict.accept_prob,
            uniform=verdict.uniform, outcome=verdict.outcome, target_argmax=q.argmax(-1).tolist(),
            n_accepted=m, next_token=verdict.next_token, next_text=text(verdict.next_token),
            next_kind=verdict.next_kind, emitted=emitted, draft_time_s=t1 - t0, verify_time_s=t2 - t1,
            n_draft_forwards=prop.n_forwards, n_generated=len(self.out), elapsed_s=stats.total_time_s,
        )
        self.rounds += 1
        return ev


def speculative_events(model: Transformer, draft: Draft, prompt_ids: list[int], params: SpecParams,
                       token_text: Callable[[int], str] = str, should_stop: Callable[[], bool] | None = None,
                       model_name: str = "model") -> Iterator[TraceEvent]:
    """Generate with speculative decoding; yields spec_started, spec_round…, spec_finished.

    Works on any `Transformer` (the tiny random ones in tests too). Emits exactly `max_new_tokens`
    tokens unless EOS or `should_stop` ends it: the last rounds draft fewer guesses (k capped at
    tokens-left − 1) so no verify work is thrown away.
    """
    run = SpeculativeRun(model, draft, prompt_ids, params, token_text)
    yield SpecStarted(model=model_name, draft=draft.name, k=params.k, temperature=params.temperature,
                      target_layers=model.config.n_layers,
                      draft_layers=draft.depth if isinstance(draft, ModelDraft) else None,
                      prompt_token_ids=list(prompt_ids), prompt_tokens=[token_text(t) for t in prompt_ids],
                      notation=NOTATION)
    try:
        run.prefill()
        while not run.done:
            if should_stop is not None and should_stop():
                run.finish = "cancelled"
                break
            yield run.round()
    finally:  # also when the consumer stops early (a closed generator)
        run.close()
    run.stats.total_time_s = time.perf_counter() - run.t_start
    yield SpecFinished(token_ids=run.out, text="", finish_reason=run.finish, metrics=run.stats.metrics())
