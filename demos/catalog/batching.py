"""Continuous vs static batching demo: the same requests (student-chosen lengths and arrival steps) run in
both modes, one after the other; the page draws a Gantt chart per request and the batch occupancy per step.
With both modes, the two are then timed in alternating repeats (`comparison.py`), with the steps requests waited
beside the times.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec
from .comparison import Side, compare
from .runner import Models


TOPICS = ("the moon", "rain", "bread", "music", "rivers", "bees", "glass", "maps")
DEFAULT_WORKLOAD = "12@0, 3@0, 4@0, 8@1, 3@2, 6@4"


# The workload's limits, also in the spec (`limits`), where the page's script reads them.
WORKLOAD_LIMITS = {"max_requests": 8, "max_tokens": 32, "max_arrival": 40}


def parse_workload(text: str, max_requests: int = WORKLOAD_LIMITS["max_requests"],
                   max_tokens: int = WORKLOAD_LIMITS["max_tokens"],
                   max_arrival: int = WORKLOAD_LIMITS["max_arrival"]) -> list[tuple[int, int]]:
    """"tokens@arrival_step, ..." → [(max_new_tokens, arrival_step)]. Raises ValueError with a readable message."""
    out = []
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        tokens, _, arrival = part.partition("@")
        try:
            n, a = int(tokens), int(arrival or 0)
        except ValueError:
            raise ValueError(f"{part!r}: write tokens@arrival_step, e.g. 8@2") from None
        if not 1 <= n <= max_tokens or not 0 <= a <= max_arrival:
            raise ValueError(f"{part!r}: tokens 1–{max_tokens}, arrival step 0–{max_arrival}")
        out.append((n, a))
    if not 1 <= len(out) <= max_requests:
        raise ValueError(f"give 1–{max_requests} requests")
    return out


def _requests(engine, jobs: list[tuple[int, int]]) -> tuple[list, dict[str, int]]:
    from inference_core import Request, SamplingParams

    reqs = [Request(f"r{i}", engine.tokenizer.encode(f"A short note about {TOPICS[i % len(TOPICS)]}:"),
                    SamplingParams(max_new_tokens=n, stop_at_eos=False)) for i, (n, _) in enumerate(jobs)]
    return reqs, {f"r{i}": a for i, (_, a) in enumerate(jobs)}


def _serve(engine, jobs: list[tuple[int, int]], mode: str, batch: int, should_stop=None) -> Iterator:
    from inference_core import SchedulerConfig, run_batch

    reqs, arrivals = _requests(engine, jobs)
    config = SchedulerConfig(mode=mode, block_size=16, num_blocks=64, max_num_seqs=batch)
    return run_batch(engine, reqs, config, arrival_steps=arrivals, should_stop=should_stop)


def timed_side(engine, jobs: list[tuple[int, int]], mode: str, batch: int) -> tuple[float, dict]:
    """One uninterrupted run of the workload: the requests' mean time to first token, and the counters that explain
    it (the steps requests spent queued before their first forward pass, the passes in all)."""
    queued: dict[str, int] = {}
    first: dict[str, int] = {}
    metrics: dict = {}
    for ev in _serve(engine, jobs, mode, batch):
        if ev.type == "request_queued":
            queued[ev.request_id] = ev.step
        elif ev.type == "batch_step":
            for entry in ev.entries:
                first.setdefault(entry["request_id"], ev.step)
        elif ev.type == "batch_run_finished":
            metrics = ev.metrics
    return metrics["mean_ttft_ms"] / 1000, {
        "steps requests waited before their first pass": sum(first[r] - queued[r] for r in first),
        "forward passes": metrics["num_steps"]}


def lesson_claim(counters: dict[str, dict]) -> str:
    """The lesson: a static batch makes a request that arrives after it started wait for the whole batch, so
    time to first token is lower with continuous batching. Where nobody waits longer (a batch of 1, every
    request arriving at once and fitting) it makes no claim."""
    waited = {mode: c["steps requests waited before their first pass"] for mode, c in counters.items()}
    return "continuous" if waited.get("continuous", 0) < waited.get("static", 0) else ""


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    # here, not at the top: the web process loads no torch
    from inference_core import Request, SamplingParams, SchedulerConfig, run_batch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    jobs = parse_workload(params["workload"])
    batch = int(params["batch_size"])
    modes = ("continuous", "static") if params["modes"] == "both" else (params["modes"],)
    # The streamed runs show the schedules; their times span the worker's other runs, so with both modes
    # the timing comes from the alternating repeats below.
    for mode in modes:
        for ev in _serve(engine, jobs, mode, batch, should_stop):
            yield ev.to_dict()
        if should_stop is not None and should_stop():
            return
    if len(modes) == 2:
        sides = [Side(mode, lambda m=mode: timed_side(engine, jobs, m, batch)) for mode in modes]
        yield from compare(*sides, metric="mean time to first token of the requests", claim=lesson_claim,
                           should_stop=should_stop)


def check_params(params: dict) -> None:
    """The workload parses (the demos app calls this before queueing a run)."""
    parse_workload(params["workload"])


SPEC = DemoSpec(
    name="batching",
    title="Continuous vs static batching",
    description=(
        "The same requests run twice: a static batch that waits for its slowest member, and continuous "
        "batching that admits and retires requests every step."
    ),
    runner=run,
    check=check_params,
    module="js/demos/batching.js",
    params={
        "workload": ParamSpec("str", default=DEFAULT_WORKLOAD, max_chars=200, limits=WORKLOAD_LIMITS,
                              label="Requests: new tokens @ arrival step, comma-separated (tokens@step, up to 8)"),
        "batch_size": ParamSpec("int", default=3, label="Batch size (sequence slots)", min_value=1, max_value=8),
        "modes": ParamSpec("choice", default="both", label="Modes", choices=("both", "continuous", "static")),
    },
    try_next=(
        "Set the batch size to 1: both modes become the same one-at-a-time schedule and their step counts meet.",
        "Try the workload “24@0, 2@0, 2@0, 2@1, 2@1, 2@2”: one long request holds the static batch while the "
        "short ones wait for it.",
    ),
)
