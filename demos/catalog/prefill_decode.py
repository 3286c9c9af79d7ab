"""The prefill-vs-decode demo: time every forward of a real generation and summarize each phase.

Streams the engine's own events (run_started, one `token` per forward, run_finished), with this server's measured
roofs (`machine_roofs`) right after run_started, then one `prefill_decode_summary` with TTFT, TPOT, inter-token
latencies and achieved FLOP/s and bytes/s.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL, RunFinished, TokenStep

from ..spec import DemoSpec, ParamSpec, max_prompt_tokens_limit
from .events import MachineRoofs, PrefillDecodeSummary
from .runner import Models


MAX_PROMPT_TOKENS = 1024  # keeps one run within a few seconds on a 2-core CPU


def build_prompt_ids(engine, prompt: str, repeat: int) -> list[int]:
    """The prompt repeated `repeat` times (a longer prefill with the same text), capped for the CPU."""
    text = " ".join([prompt.strip()] * max(1, repeat))
    return engine.encode_prompt(text, chat=False)[:MAX_PROMPT_TOKENS]


def server_roofs() -> MachineRoofs:
    """The roofs the run's points are drawn against: the newest machine profile this server's demo worker measured
    (serverprofile.figures.current), the same row the roofline calculator gets."""
    from serverprofile import figures

    try:
        server = figures.current()
    except RuntimeError:  # a process barred from the database (a test without one): the recorded figures
        server = figures.recorded()
    machine = server.machine()
    return MachineRoofs(label=machine["label"], bandwidth_bytes_per_s=machine["bandwidth_gbps"] * 1e9,
                        peak_flops_per_s=machine["peak_gflops"] * 1e9, note=machine["note"], live=server.live)


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


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    from inference_core import GenerationParams  # the worker only: the web loads no torch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    gen = GenerationParams(max_new_tokens=int(params["max_new_tokens"]), temperature=0.0, stop_at_eos=False)
    prompt_ids = build_prompt_ids(engine, params["prompt"], int(params["repeat_prompt"]))
    steps: list[TokenStep] = []
    finished = None
    for ev in engine.generate_events(prompt_ids, gen, should_stop):
        if isinstance(ev, TokenStep):
            steps.append(ev)
        elif isinstance(ev, RunFinished):
            finished = ev
        event = ev.to_dict()
        yield event
        if event["type"] == "run_started":
            yield server_roofs().to_dict()
    if steps and finished is not None and finished.finish_reason != "cancelled":
        yield summarize(steps, engine.config.matmul_params() * engine.bytes_per_value).to_dict()


SPEC = DemoSpec(
    name="prefill-decode",
    title="Prefill vs decode, timed",
    description=(
        "Time every forward pass of a real generation: one prefill over the whole prompt, then one "
        "decode step per token. Shows TTFT, TPOT, inter-token latency and the achieved FLOP/s and GB/s."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/prefill-decode.js",
    params={
        "prompt": ParamSpec("str", default="The capital of France is", label="Prompt", max_chars=4000,
                            max_tokens=max_prompt_tokens_limit),
        "repeat_prompt": ParamSpec("int", default=4, label="Repeat the prompt (longer prefill)",
                                   min_value=1, max_value=16),
        "max_new_tokens": ParamSpec("int", default=12, label="New tokens", min_value=2, max_value=48),
    },
    presets=(
        {"label": "Capital of France", "prompt": "The capital of France is"},
        {"label": "Story opening", "prompt": "Once upon a time, in a small village by the sea,"},
    ),
    try_next=(
        "Set “Repeat the prompt” to 16: the prefill gets longer, yet its cost per prompt token falls further, "
        "while every decode step still costs about the same.",
        "Set it to 1: a 5-token prompt shares each weight read among only 5 tokens, so prefill's advantage per "
        "token shrinks.",
    ),
)
