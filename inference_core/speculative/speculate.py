"""Speculative decoding for a loaded model: drafts by name, the run as one event stream (driven by `LLMEngine.step`),
the plain baseline."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import fields

from torch import nn

from ..engine.llm_engine import LLMEngine, one_request_config
from ..engine.loaded_model import GenerationParams, LoadedModel, load_engine
from ..engine.scheduler import Request
from ..engine.trace import RunFinished, TraceEvent
from ..model.sampling import SamplingParams
from ..model.transformer import Transformer
from ..quant.quantize import quantize_model
from .adaptive import AdaptiveK, CostAwareK, RoundCost
from .decode import SpecDecoding, SpecParams
from .drafts import Draft, ModelDraft, NgramDraft
from .events import NOTATION, SpecFinished, SpecStarted


DEFAULT_EXIT_LAYERS = 12


def make_draft(engine: LoadedModel, kind: str) -> Draft:
    """'ngram[:N]' (proposes after a match of at least N tokens, default 1) | 'self-early-exit[:L]' | 'self-int8' |
    another model name sharing the tokenizer."""
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
    model = engine.derived_models.get(kind)  # made or loaded once, kept with the target that drafts with it
    if model is None and kind == "self-int8":  # a weight-only int8 copy of the target (embedding, norms shared)
        model = quantize_model(engine.model, "int8")
    elif model is None:  # another model sharing the tokenizer
        model, vocab = load_engine(kind, device=str(engine.device)).model, engine.config.vocab_size
        if model.config.vocab_size != vocab:
            raise ValueError(f"draft {kind} has vocabulary {model.config.vocab_size}, target {vocab}")
    engine.derived_models[kind] = model
    return ModelDraft(model, name=kind)


def read_bytes(model: Transformer, n_layers: int | None = None) -> int:
    """Weight bytes a forward reads: the blocks it runs and the output head (decode on a CPU is bandwidth-bound)."""
    def size(m: nn.Module) -> int:
        return sum(t.numel() * t.element_size() for t in itertools.chain(m.parameters(), m.buffers()))
    return sum(size(b) for b in model.layers[:n_layers]) + size(model.output)


def make_policy(engine: LoadedModel, draft: Draft, params: SpecParams) -> AdaptiveK | CostAwareK | None:
    """The per-request k policy of `params` (None: k fixed); the cost-aware one's priors until the request's own
    timings and acceptance replace them: docs/engine-notes.md."""
    if not params.adaptive:
        return None
    cap = max(params.k, 1)
    if params.policy == "acceptance":
        return AdaptiveK(cap=cap)
    if params.policy != "cost":
        raise ValueError(f"unknown k policy {params.policy!r}: 'cost' or 'acceptance'")
    if isinstance(draft, ModelDraft):
        ratio = read_bytes(draft.model, draft.n_layers) / read_bytes(engine.model)
        return CostAwareK(cap=cap, costs=RoundCost(draft=ratio), prior=0.7)
    return CostAwareK(cap=cap, prior=0.4)


def speculate(engine: LoadedModel, prompt_ids: list[int], draft: Draft | str, params: SpecParams,
              should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
    """One speculative request as a one-request schedule of `LLMEngine.step()`s, each a round (the first is its
    prefill): run_started, spec_started, spec_round…, spec_finished, run_finished (docs/engine-notes.md)."""
    if isinstance(draft, str):
        draft = make_draft(engine, draft)
    spec = SpecDecoding(draft, params.k, engine.tokenizer.token_text, make_policy(engine, draft, params))
    started = engine.run_started(prompt_ids, params, draft=draft.name)
    yield started
    yield SpecStarted(model=engine.name, draft=draft.name, k=params.k, temperature=params.temperature,
                      prompt_token_ids=started.prompt_token_ids, prompt_tokens=started.prompt_tokens,
                      target_layers=started.n_layers, notation=NOTATION,
                      draft_layers=draft.depth if isinstance(draft, ModelDraft) else None)
    req = Request("speculative", list(prompt_ids), params, spec=spec)
    llm = LLMEngine(engine, one_request_config(engine, req), trace=False)
    first_round_s = 0.0
    try:
        llm.add_request(req)
        spec.t_start = time.perf_counter()
        while llm.has_work():
            if should_stop is not None and should_stop():
                llm.abort(req.request_id)
                break
            llm.step()
            for ev in spec.take_rounds():
                if ev.round == 0:
                    first_round_s = ev.elapsed_s
                yield ev
    finally:  # also when the consumer stops early (a closed generator): the pools go back to their runners
        llm.close()
        spec.release()
    spec.stats.n_prompt_tokens, spec.stats.total_time_s = len(prompt_ids), time.perf_counter() - spec.t_start
    ids, m = list(req.output_ids), spec.stats.metrics()
    finish = {"aborted": "cancelled"}.get(req.finish_reason, req.finish_reason)
    text = engine.tokenizer.decode(ids, skip_special=True)
    yield SpecFinished(token_ids=ids, text=text, finish_reason=finish, metrics=m)
    n, rest = m["n_generated"], m["total_time_s"] - first_round_s
    yield RunFinished(token_ids=ids, text=text, finish_reason=finish, n_prompt_tokens=len(prompt_ids), n_generated=n,
                      ttft_s=first_round_s, tpot_s=rest / (n - 1) if n > 1 else 0.0, tokens_per_s=m["tokens_per_s"],
                      kv_bytes=0)


def plain_timed(engine: LoadedModel, prompt_ids: list[int], params: SpecParams) -> tuple[list[int], float, float]:
    """Plain decoding of the same request: (token ids, total seconds, prefill seconds)."""
    gen = GenerationParams(**{f.name: getattr(params, f.name) for f in fields(SamplingParams)})
    ids: list[int] = []
    prefill, t0 = 0.0, time.perf_counter()
    for ev in engine.generate_events(prompt_ids, gen):
        if ev.type == "token":
            ids.append(ev.token_id)
            prefill = ev.step_time_s if ev.phase == "prefill" else prefill
    return ids, time.perf_counter() - t0, prefill


def run_speculative(engine: LoadedModel, prompt_ids: list[int], draft: Draft | str, params: SpecParams) -> tuple[list[int], dict]:
    """Convenience: (generated ids, metrics)."""
    final = next(ev for ev in speculate(engine, prompt_ids, draft, params) if isinstance(ev, SpecFinished))
    return final.token_ids, final.metrics
