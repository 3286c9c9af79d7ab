"""The serving-load demo: a small burst of requests against our own engine, measured like a load test.

Requests arrive `spacing_s` apart (wall clock). In "batched" mode the paged scheduler
(`inference_core.engine.scheduler`, continuous batching) runs them together, one forward per step; in "sequential"
mode `engine.generate` serves one request at a time in arrival order, so later arrivals queue. Per request
it reports TTFT (from arrival, queueing included), TPOT and inter-token latencies; at the end throughput,
goodput (requests meeting both SLOs per second) and percentiles.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference_core import DEFAULT_MODEL, TokenStep

from ..spec import DemoSpec, ParamSpec
from .events import LoadRequest, LoadStep, LoadSummary

PROMPTS = (
    "The capital of France is",
    "Write one sentence about the ocean:",
    "List three primary colors:",
    "Once upon a time, in a small village by the sea,",
    "The three states of water are",
    "A good name for a friendly robot is",
    "To make a simple tomato sauce, first",
    "The fastest land animal is",
)


@dataclass
class Tracked:
    """One request's timeline, in seconds from the start of the run."""

    rid: int
    prompt: str
    prompt_ids: list[int]
    arrival_s: float
    start_s: float | None = None
    token_s: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]); 0.0 for no values."""
    if not values:
        return 0.0
    vs = sorted(values)
    return vs[min(len(vs) - 1, max(0, round(q * (len(vs) - 1))))]


def request_event(r: Tracked, engine, ttft_slo: float, tpot_slo: float) -> LoadRequest:
    ttft = r.token_s[0] - r.arrival_s
    itl = [b - a for a, b in zip(r.token_s, r.token_s[1:])]
    tpot = (r.token_s[-1] - r.token_s[0]) / (len(r.token_s) - 1) if len(r.token_s) > 1 else 0.0
    return LoadRequest(
        request_id=r.rid, prompt=r.prompt, n_prompt_tokens=len(r.prompt_ids), n_generated=len(r.token_ids),
        arrival_s=r.arrival_s, start_s=r.start_s if r.start_s is not None else r.token_s[0],
        first_token_s=r.token_s[0], end_s=r.token_s[-1], ttft_s=ttft, tpot_s=tpot, itl_s=itl,
        met_slo=ttft <= ttft_slo and tpot <= tpot_slo,
        text=engine.tokenizer.decode(r.token_ids, skip_special=True),
    )


def _wait_until(t0: float, t_s: float, should_stop) -> None:
    while time.perf_counter() - t0 < t_s:
        if should_stop is not None and should_stop():
            return
        time.sleep(min(0.05, max(0.0, t_s - (time.perf_counter() - t0))))


def _sequential(engine, reqs: list[Tracked], max_new: int, t0: float, should_stop) -> Iterator[tuple]:
    from inference_core import GenerationParams

    gen = GenerationParams(max_new_tokens=max_new, temperature=0.0, stop_at_eos=False)
    total = 0
    for i, r in enumerate(reqs):
        _wait_until(t0, r.arrival_s, should_stop)
        r.start_s = time.perf_counter() - t0
        for ev in engine.generate_events(r.prompt_ids, gen, should_stop):
            if isinstance(ev, TokenStep):
                now = time.perf_counter() - t0
                r.token_s.append(now)
                r.token_ids.append(ev.token_id)
                total += 1
                waiting = sum(1 for x in reqs[i + 1:] if x.arrival_s <= now)
                yield "step", LoadStep(t_s=now, n_running=1, n_waiting=waiting, tokens_total=total)
        if should_stop is not None and should_stop():
            return
        yield "done", r


def _batched(engine, reqs: list[Tracked], max_new: int, t0: float, should_stop) -> Iterator[tuple]:
    from inference_core import LLMEngine, Request, SamplingParams, SchedulerConfig

    blocks = len(reqs) * (-(-(max(len(r.prompt_ids) for r in reqs) + max_new) // 16)) + 8
    llm = LLMEngine(engine, SchedulerConfig(mode="continuous", block_size=16, num_blocks=blocks), trace=False)
    sched = llm.scheduler
    by_id: dict[str, Tracked] = {}
    pending = list(reqs)
    total = 0
    while pending or sched.has_work():
        if should_stop is not None and should_stop():
            return
        now = time.perf_counter() - t0
        while pending and pending[0].arrival_s <= now:
            r = pending.pop(0)
            by_id[str(r.rid)] = r
            params = SamplingParams(max_new_tokens=max_new, stop_at_eos=False)
            sched.add_request(Request(str(r.rid), r.prompt_ids, params))
        if not sched.has_work():
            _wait_until(t0, pending[0].arrival_s, should_stop)
            continue
        started = {rid for rid, r in by_id.items() if r.start_s is None}
        t_step = time.perf_counter() - t0
        llm.step()
        now = time.perf_counter() - t0
        for rid in started:
            if sched.requests[rid].output_ids:
                by_id[rid].start_s = t_step
        for rid, r in by_id.items():
            req = sched.requests[rid]
            while len(r.token_ids) < len(req.output_ids):  # tokens produced by this step
                r.token_ids.append(req.output_ids[len(r.token_ids)])
                r.token_s.append(now)
                total += 1
        yield "step", LoadStep(t_s=now, n_running=len(sched.running), n_waiting=len(sched.waiting) + len(pending),
                               tokens_total=total)
        for rid, r in by_id.items():
            if sched.requests[rid].status == "finished" and not getattr(r, "_reported", False):
                r._reported = True  # type: ignore[attr-defined]
                yield "done", r


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    from inference_core import load_engine  # the worker only: the web process loads no torch

    params = SPEC.with_defaults(params)
    engine = load_engine(params.get("model", DEFAULT_MODEL))
    n = int(params["n_requests"])
    max_new = int(params["max_new_tokens"])
    spacing = float(params["spacing_s"])
    ttft_slo, tpot_slo = float(params["ttft_slo_s"]), float(params["tpot_slo_s"])
    mode = params["mode"]
    note = ("continuous batching: the paged scheduler runs every admitted request in one forward per step"
            if mode == "batched" else "sequential: engine.generate serves one request at a time; later ones queue")
    runner = _batched if mode == "batched" else _sequential
    first = params.get("prompt")
    prompts = ([first] if first else []) + [p for p in PROMPTS if p != first]
    reqs = [Tracked(i, prompts[i % len(prompts)], engine.encode_prompt(prompts[i % len(prompts)], chat=False),
                    arrival_s=i * spacing) for i in range(n)]
    t0 = time.perf_counter()
    finished: list[LoadRequest] = []
    for kind, item in runner(engine, reqs, max_new, t0, should_stop):
        if kind == "step":
            yield item.to_dict()
        else:
            ev = request_event(item, engine, ttft_slo, tpot_slo)
            finished.append(ev)
            yield ev.to_dict()
    if should_stop is not None and should_stop() or not finished:
        return
    wall = max(r.end_s for r in finished)
    out_tokens = sum(r.n_generated for r in finished)
    itl = [x for r in finished for x in r.itl_s]
    ttfts = [r.ttft_s for r in finished]
    yield LoadSummary(
        mode=mode, note=note, n_requests=len(finished), wall_s=wall, output_tokens=out_tokens,
        throughput_tokens_per_s=out_tokens / wall, requests_per_s=len(finished) / wall,
        goodput_requests_per_s=sum(r.met_slo for r in finished) / wall, ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo,
        ttft_p50_s=percentile(ttfts, 0.5), ttft_p90_s=percentile(ttfts, 0.9),
        tpot_p50_s=statistics.median(r.tpot_s for r in finished), itl_p50_s=percentile(itl, 0.5),
        itl_p90_s=percentile(itl, 0.9),
    ).to_dict()


SPEC = DemoSpec(
    name="serving-load",
    title="A small load test against our engine",
    description=(
        "Send a handful of requests to the course engine and measure what a serving benchmark measures: "
        "TTFT, TPOT, inter-token latency, throughput and goodput."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/serving-load.js",
    params={
        "n_requests": ParamSpec("int", default=3, label="Requests", min_value=1, max_value=6),
        "max_new_tokens": ParamSpec("int", default=6, label="Tokens per request", min_value=2, max_value=24),
        "spacing_s": ParamSpec("float", default=0.0, label="Seconds between arrivals", min_value=0.0,
                               max_value=2.0),
        "mode": ParamSpec("choice", default="batched", label="Scheduling", choices=("batched", "sequential")),
        "ttft_slo_s": ParamSpec("float", default=3.0, label="TTFT target (s)", min_value=0.05, max_value=60.0),
        "tpot_slo_s": ParamSpec("float", default=0.5, label="TPOT target (s)", min_value=0.01, max_value=10.0),
    },
    try_next=(
        "Switch “Scheduling” to sequential with the same settings and compare the runs: the first request is "
        "served as fast, every later one queues behind it, and throughput falls.",
        "Tighten the TPOT target to 0.05 s: goodput falls while throughput stays the same.",
    ),
)
