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

import json
import sys
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields

import torch

from .drafts import Draft, ModelDraft, NgramDraft, Proposal
from ..engine.loaded_model import Engine, GenerationParams
from ..model.transformer import Transformer
from ..engine.model_runner import runner_for
from ..model.sampling import SamplingParams, probabilities
from ..engine.trace import RunFinished, RunStarted, TraceEvent, event

NOTATION = "p = draft distribution, q = target distribution (Chen et al. 2023; Leviathan et al. 2023 swap the letters)"

Outcome = typing.Literal["accepted", "rejected", "not_reached"]


# ---------------------------------------------------------------- trace events (docs/trace-schema/speculative.md)

@event("spec_started")
class SpecStarted(TraceEvent):
    model: str
    draft: str
    k: int
    temperature: float
    target_layers: int
    draft_layers: int | None  # None for a draft without a model (n-gram)
    prompt_token_ids: list[int]
    prompt_tokens: list[str]
    notation: str


@event("spec_baseline")
class SpecBaseline(TraceEvent):
    """Plain decoding of the same prompt, timed first so the demo can show a running speedup."""

    token_ids: list[int]
    total_time_s: float
    time_per_token_s: float
    prefill_time_s: float


@event("spec_round")
class SpecRound(TraceEvent):
    """One draft → verify → accept round. Lists over drafted positions have length len(drafted)."""

    round: int
    position: int  # sequence position of the first drafted token
    drafted: list[int]
    drafted_text: list[str]
    p_draft: list[float]  # p_i(d_i): the draft's probability of its own guess (1.0 if deterministic)
    q_target: list[float]  # q_i(d_i): the target's probability of the same token
    accept_prob: list[float]  # min(1, q/p)
    uniform: list[float | None]  # r ~ U(0,1) drawn to decide (None in greedy mode or when not reached)
    outcome: list[Outcome]
    target_argmax: list[int]  # the target's top token at each of the k+1 verified positions
    n_accepted: int
    next_token: int  # the residual sample (after a rejection) or the bonus token (all accepted)
    next_text: str
    next_kind: typing.Literal["residual", "bonus"]
    emitted: list[int]  # accepted guesses + next_token (cut at max_new_tokens / EOS)
    draft_time_s: float
    verify_time_s: float
    n_draft_forwards: int
    n_generated: int  # tokens emitted so far, this round included
    elapsed_s: float  # since the run started (prefill included)


@event("spec_finished")
class SpecFinished(TraceEvent):
    token_ids: list[int]
    text: str
    finish_reason: typing.Literal["length", "eos", "cancelled"]
    metrics: dict


# ---------------------------------------------------------------- the acceptance rule

@dataclass
class Verdict:
    n_accepted: int
    next_token: int
    next_kind: str
    p_draft: list[float]
    q_target: list[float]
    accept_prob: list[float]
    uniform: list[float | None]
    outcome: list[str]


def _rand(generator: torch.Generator | None) -> float:
    return float(torch.rand((), generator=generator))


def _draw(dist: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(dist.cpu(), 1, generator=generator))


def accept(drafted: list[int], p: torch.Tensor | None, q: torch.Tensor, greedy: bool,
           generator: torch.Generator | None = None) -> Verdict:
    """Rejection-sample the drafted tokens against the target.

    drafted: k tokens; p: [k, V] draft distributions or None (one-hot, deterministic draft);
    q: [k+1, V] target distributions (row i scores the token after drafted[:i]).
    Greedy: accept while drafted[i] == argmax q_i, then emit argmax q_{m} — the one-hot special case.
    """
    k = len(drafted)
    idx = torch.tensor(drafted, dtype=torch.long)
    if greedy:  # q may be raw logits here; the one-hot values are what the rule uses
        top = q.argmax(-1).tolist()  # one device → host copy for the round (on a GPU each int() would sync)
        q_tok = [float(d == top[i]) for i, d in enumerate(drafted)]
        p_tok = [1.0] * k
    else:
        q_tok = q[torch.arange(k), idx].tolist() if k else []
        p_tok = p[torch.arange(k), idx].tolist() if (k and p is not None) else [1.0] * k
    ratio = [min(1.0, qi / pi) if pi > 0 else 0.0 for pi, qi in zip(p_tok, q_tok)]
    uniform: list[float | None] = [None] * k
    outcome = ["not_reached"] * k
    for i in range(k):
        if greedy:
            ok = drafted[i] == top[i]
        else:
            r = _rand(generator)
            uniform[i] = r
            ok = r < ratio[i]
        if ok:
            outcome[i] = "accepted"
            continue
        outcome[i] = "rejected"
        if greedy:
            nxt = top[i]
        else:
            p_i = p[i] if p is not None else torch.nn.functional.one_hot(idx[i], q.shape[-1]).to(q.device, q.dtype)
            residual = (q[i] - p_i).clamp_min(0.0)
            total = float(residual.sum())
            # total > 0 whenever a rejection is possible (q ≠ p); guard float round-off anyway
            nxt = _draw(residual / total if total > 0 else q[i], generator)
        return Verdict(i, nxt, "residual", p_tok, q_tok, ratio, uniform, outcome)
    nxt = top[k] if greedy else _draw(q[k], generator)
    return Verdict(k, nxt, "bonus", p_tok, q_tok, ratio, uniform, outcome)


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


# ---------------------------------------------------------------- drafts by name, engine-level API

DRAFT_KINDS = ("ngram", "self-early-exit", "self-int8")
DEFAULT_EXIT_LAYERS = 12


def make_draft(engine: Engine, kind: str) -> Draft:
    """'ngram[:N]' | 'self-early-exit[:L]' | 'self-int8' | another model name sharing the tokenizer.

    'ngram:N' only proposes after a match of at least N tokens (default 1): fewer, better guesses.
    """
    if kind == "ngram" or kind.startswith("ngram:"):
        _, _, n_min = kind.partition(":")
        n = int(n_min) if n_min else 1
        if not 1 <= n <= 3:
            raise ValueError("ngram:N needs N in 1..3")
        return NgramDraft(n_max=3, n_min=n, name=kind)
    if kind.startswith("self-early-exit"):
        _, _, layers = kind.partition(":")
        n = int(layers) if layers else DEFAULT_EXIT_LAYERS
        if not 1 <= n < engine.config.n_layers:
            raise ValueError(f"early-exit layers must be in 1..{engine.config.n_layers - 1}")
        return ModelDraft(engine.model, n_layers=n, name=f"self-early-exit:{n}")
    if kind == "self-int8":
        return ModelDraft(int8_copy(engine), name="self-int8")
    from ..engine.loaded_model import load_engine

    other = load_engine(kind, device=str(engine.device))
    if other.config.vocab_size != engine.config.vocab_size:
        raise ValueError(f"draft {kind} has vocabulary {other.config.vocab_size}, target {engine.config.vocab_size}")
    return ModelDraft(other.model, name=kind)


_INT8: dict[int, Transformer] = {}


def int8_copy(engine: Engine) -> Transformer:
    """A weight-only int8 copy of the target (cached per engine): same tokenizer by construction."""
    key = id(engine.model)
    if key not in _INT8:
        try:
            from ..quant.linears import quantize_model
        except ImportError as exc:  # the quantization module is another issue's work
            raise ValueError("self-int8 needs inference_core.quant.linears (not available)") from exc
        # a copy with int8 projections and head; embedding, norms and RoPE tables shared with the target
        _INT8[key] = quantize_model(engine.model, "int8", inplace=False)
    return _INT8[key]


def speculate(engine: Engine, prompt_ids: list[int], draft: Draft | str, params: SpecParams,
              should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
    """Engine-level stream: run_started, spec_started, spec_round…, spec_finished, run_finished."""
    if isinstance(draft, str):
        draft = make_draft(engine, draft)
    cfg = engine.config
    yield RunStarted(model=engine.name, device=str(engine.device), dtype=engine.dtype_name,
                     prompt_token_ids=list(prompt_ids), prompt_tokens=[engine.tokenizer.token_text(t) for t in prompt_ids],
                     params={**asdict(params), "draft": draft.name}, n_layers=cfg.n_layers,
                     kv_bytes_per_token=cfg.kv_bytes_per_token(engine.bytes_per_value))
    final: SpecFinished | None = None
    first_round_s = 0.0
    for ev in speculative_events(engine.model, draft, prompt_ids, params, engine.tokenizer.token_text, should_stop,
                                 model_name=engine.name):
        if isinstance(ev, SpecRound) and ev.round == 0:
            first_round_s = ev.elapsed_s
        if isinstance(ev, SpecFinished):
            ev = SpecFinished(token_ids=ev.token_ids, text=engine.tokenizer.decode(ev.token_ids, skip_special=True),
                              finish_reason=ev.finish_reason, metrics=ev.metrics)
            final = ev
        yield ev
    assert final is not None
    m = final.metrics
    n = m["n_generated"]
    rest = m["total_time_s"] - first_round_s
    yield RunFinished(token_ids=final.token_ids, text=final.text, finish_reason=final.finish_reason,
                      n_prompt_tokens=len(prompt_ids), n_generated=n, ttft_s=first_round_s,
                      tpot_s=rest / (n - 1) if n > 1 else 0.0, tokens_per_s=m["tokens_per_s"], kv_bytes=0)


def plain_timed(engine: Engine, prompt_ids: list[int], params: SpecParams) -> tuple[list[int], float, float]:
    """Plain decoding of the same request: (token ids, total seconds, prefill seconds)."""
    gen = GenerationParams(**{f.name: getattr(params, f.name) for f in fields(SamplingParams)})
    t0 = time.perf_counter()
    ids: list[int] = []
    prefill = 0.0
    for ev in engine.generate_events(prompt_ids, gen):
        if ev.type == "token":
            ids.append(ev.token_id)
            if ev.phase == "prefill":
                prefill = ev.step_time_s
    return ids, time.perf_counter() - t0, prefill


def run_speculative(engine: Engine, prompt_ids: list[int], draft: Draft | str, params: SpecParams) -> tuple[list[int], dict]:
    """Convenience: (generated ids, metrics)."""
    final = None
    for ev in speculate(engine, prompt_ids, draft, params):
        if isinstance(ev, SpecFinished):
            final = ev
    assert final is not None
    return final.token_ids, final.metrics


# ---------------------------------------------------------------- CLI

def add_speculate(sub) -> None:
    from ..cli.main import add_generation_args, add_model_arg

    p = sub.add_parser("speculate", help="speculative decoding with a draft (exact: same output distribution)")
    add_model_arg(p)
    p.add_argument("--draft", default="ngram",
                   help="ngram | self-early-exit[:L] | self-int8 | MODEL (a model sharing the tokenizer)")
    p.add_argument("--k", type=int, default=4, help="tokens drafted per round")
    add_generation_args(p)
    p.add_argument("--chat", action="store_true", help="apply the model's chat template")
    p.add_argument("--no-baseline", action="store_true", help="skip timing plain decoding for the speedup")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_speculate)


def cmd_speculate(args) -> int:
    from ..engine.loaded_model import load_engine

    engine = load_engine(args.model)
    prompt_ids = engine.encode_prompt(args.prompt, args.chat)
    params = SpecParams(k=args.k, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                        top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    draft = make_draft(engine, args.draft)
    baseline = None
    if not args.no_baseline:
        plain_timed(engine, prompt_ids, params)  # warm-up
        base_ids, base_s, _ = plain_timed(engine, prompt_ids, params)
        baseline = (base_ids, base_s)
    ids, metrics = run_speculative(engine, prompt_ids, draft, params)
    if baseline is not None:
        metrics["plain_time_s"] = baseline[1]
        metrics["speedup"] = baseline[1] / metrics["total_time_s"] if metrics["total_time_s"] else 0.0
        if params.temperature <= 0:
            metrics["identical_to_plain"] = baseline[0] == ids
    text = engine.tokenizer.decode(ids, skip_special=True)
    if args.json:
        print(json.dumps({"token_ids": ids, "text": text, "draft": draft.name, "metrics": metrics}))
    else:
        print(text)
        by_pos = " ".join("–" if a is None else f"{a:.2f}" for a in metrics["acceptance_by_position"])
        line = (f"\n{draft.name}, k={params.k}: acceptance {metrics['acceptance_rate']:.2f} (by position {by_pos}); "
                f"{metrics['mean_accept_length']:.2f} tokens per target pass; "
                f"{metrics['target_forwards_per_token']:.2f} target passes per token")
        if "speedup" in metrics:
            line += f"; speedup {metrics['speedup']:.2f}× vs plain decoding"
        print(line, file=sys.stderr)
    return 0
