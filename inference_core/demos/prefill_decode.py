"""The prefill-vs-decode demo: time every forward of a real generation and summarize each phase.

Streams the engine's own events (run_started, one `token` per forward, run_finished), then one
`prefill_decode_summary` with TTFT, TPOT, inter-token latencies and achieved FLOP/s and bytes/s.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator

from ..config import DEFAULT_MODEL
from ..course_trace import PrefillDecodeSummary
from ..engine import GenerationParams, load_engine
from ..trace import RunFinished, TokenStep

MAX_PROMPT_TOKENS = 1024  # keeps one run within a few seconds on a 2-core CPU


def build_prompt_ids(engine, prompt: str, repeat: int) -> list[int]:
    """The prompt repeated `repeat` times (a longer prefill with the same text), capped for the CPU."""
    text = " ".join([prompt.strip()] * max(1, repeat))
    return engine.encode_prompt(text, chat=False)[:MAX_PROMPT_TOKENS]


def summarize(steps: list[TokenStep], weight_bytes: int) -> PrefillDecodeSummary:
    """Phase aggregates from the token events (the first step is prefill, the rest decode)."""
    prefill, decode = steps[0], steps[1:]
    itl = [s.step_time_s for s in decode]
    decode_time = sum(itl)
    return PrefillDecodeSummary(
        n_prompt_tokens=prefill.n_input_tokens,
        n_generated=len(steps),
        ttft_s=prefill.step_time_s,
        tpot_s=decode_time / len(decode) if decode else 0.0,
        itl_s=itl,
        prefill_tokens_per_s=prefill.n_input_tokens / prefill.step_time_s,
        decode_tokens_per_s=len(decode) / decode_time if decode else 0.0,
        prefill_flops_per_s=prefill.flops / prefill.step_time_s,
        decode_flops_per_s=sum(s.flops for s in decode) / decode_time if decode else 0.0,
        decode_bytes_per_s=statistics.median(s.bytes_moved / s.step_time_s for s in decode) if decode else 0.0,
        prefill_intensity=prefill.flops / prefill.bytes_moved,
        decode_intensity=statistics.median(s.flops / s.bytes_moved for s in decode) if decode else 0.0,
        weight_bytes=weight_bytes,
    )


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    engine = load_engine(params.get("model", DEFAULT_MODEL))
    gen = GenerationParams(max_new_tokens=int(params.get("max_new_tokens", 32)), temperature=0.0,
                           stop_at_eos=False)
    prompt_ids = build_prompt_ids(engine, params["prompt"], int(params.get("repeat_prompt", 1)))
    steps: list[TokenStep] = []
    finished = None
    for ev in engine.generate_events(prompt_ids, gen, should_stop):
        if isinstance(ev, TokenStep):
            steps.append(ev)
        elif isinstance(ev, RunFinished):
            finished = ev
        yield ev.to_dict()
    if steps and finished is not None and finished.finish_reason != "cancelled":
        yield summarize(steps, engine.config.matmul_params() * engine.bytes_per_value).to_dict()
