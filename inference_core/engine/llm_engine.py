"""LLMEngine: the one generation loop. step() = Scheduler.schedule() → ModelRunner.run() → postprocess."""
from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Iterator

from .metrics import step_cost
from .model_runner import runner_for
from .paged_trace import BatchRunFinished, BatchRunStarted, BatchStep, RequestFinished
from .scheduler import Request, Scheduler, SchedulerConfig
from .trace import RunFinished, SamplingStep, TokenStep, TraceEvent


class LLMEngine:
    """One scheduler and one runner over one KV pool lent by the runner until `close()`. Not thread-safe."""

    def __init__(self, engine, config: SchedulerConfig = SchedulerConfig(), trace: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.config = config
        self.runner = runner_for(engine.model)
        self.pool = self.runner.lend_pool(config.num_blocks, config.block_size, kv_dtype=config.kv_dtype)
        self.close = weakref.finalize(self, self.runner.give_back, self.pool)  # idempotent; runs at collection too
        self.scheduler = Scheduler(engine.config, config, engine.tokenizer, trace=trace, clock=clock)
        self.clock = clock
        self.scheduler.emit(BatchRunStarted(
            model=engine.name, mode=config.mode, block_size=config.block_size, num_blocks=config.num_blocks,
            max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
            prefix_caching=config.prefix_caching, n_layers=engine.config.n_layers,
            kv_bytes_per_token=self.pool.bytes_per_token(), kv_bytes_per_block=self.pool.bytes_per_block()))

    def add_request(self, req: Request) -> None:
        self.scheduler.add_request(req)
        if req.spec is not None:  # a model draft's pool is lent here, never inside a (timed) step
            req.spec.begin(req)

    def abort(self, request_id: str) -> list[TraceEvent]:
        return self.scheduler.abort(request_id)

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def step(self) -> list[TraceEvent]:
        """Draft, schedule, one forward for the whole batch, postprocess: this step's trace events."""
        t_start = self.clock()
        for req, k in self.scheduler.to_draft():  # the draft phase: speculative requests guess before the verify
            req.drafted = req.spec.propose(req, k)
        batch = self.scheduler.schedule()
        if batch is None:
            return self.scheduler.drain()
        outputs = self.runner.run(batch, self.pool)
        return self.scheduler.postprocess(batch, outputs, t_start)

    def drain(self) -> list[TraceEvent]:
        return self.scheduler.drain()

    def run_metrics(self) -> dict:
        return self.scheduler.run_metrics()


class RequestStream:
    """One request's view of the batch's events: `token` per step it took part in, then `run_finished`."""

    def __init__(self, llm: LLMEngine) -> None:
        self.cfg, self.bpv = llm.engine.config, llm.engine.bytes_per_value
        self.per_token = llm.pool.bytes_per_token()
        self.scheduler = llm.scheduler
        self.kv_cache = llm.config.kv_cache

    def token(self, ev: BatchStep, entry: dict) -> TokenStep:
        cfg = self.cfg
        req = self.scheduler.requests[entry["request_id"]]
        context = entry["context_len"]
        flops, moved = step_cost(cfg, entry["n_tokens"], context, self.bpv, self.kv_cache)
        per_layer = context * self.per_token // cfg.n_layers if self.kv_cache else 0
        return TokenStep(
            phase=entry["phase"], step=len(req.output_ids) - 1, token_id=entry["token_id"], text=entry["text"],
            position=context, n_input_tokens=entry["n_tokens"], step_time_s=ev.duration_s,
            kv_bytes_total=per_layer * cfg.n_layers, kv_bytes_per_layer=[per_layer] * cfg.n_layers,
            flops=flops, bytes_moved=moved, batch_size=len(ev.entries))

    def finished(self, ev: RequestFinished) -> RunFinished:
        req = self.scheduler.requests[ev.request_id]
        gaps = ev.itl_s or []
        reason = {"aborted": "cancelled"}.get(ev.finish_reason, ev.finish_reason)
        kept = self.kv_cache and reason != "cancelled"
        return RunFinished(
            token_ids=list(ev.token_ids), text=ev.text, finish_reason=reason, n_prompt_tokens=ev.n_prompt_tokens,
            n_generated=ev.n_generated, ttft_s=ev.ttft_s or 0.0, tpot_s=ev.tpot_s or 0.0,
            tokens_per_s=len(gaps) / sum(gaps) if gaps and sum(gaps) > 0 else 0.0,
            kv_bytes=(len(req.all_ids) - 1) * self.per_token if kept else 0)

    def route(self, events: list[TraceEvent]) -> Iterator[tuple[str, TraceEvent]]:
        """(request id, event) for each token and run_finished in `events`, tokens first."""
        for ev in sorted(events, key=lambda e: not isinstance(e, BatchStep)):
            if isinstance(ev, BatchStep):
                for entry in ev.entries:
                    if entry["token_id"] is not None:  # None: nothing emitted this step
                        yield entry["request_id"], (token := self.token(ev, entry))
                        if (req := self.scheduler.requests[entry["request_id"]]).choice is not None:
                            yield req.request_id, SamplingStep(step=token.step, top_texts=[
                                self.scheduler._text(t) for t in req.choice["top_ids"]], **req.choice)
            elif isinstance(ev, RequestFinished):
                yield ev.request_id, self.finished(ev)


def one_request_config(engine, request: Request, kv_cache: bool = True, bs: int = 16) -> SchedulerConfig:
    """A schedule for `request` alone: blocks for all its positions, its whole prompt in one step."""
    total = len(request.prompt_ids) + request.params.max_new_tokens
    return SchedulerConfig(block_size=bs, num_blocks=max(1, -(-total // bs)), max_num_seqs=1,
                           max_num_batched_tokens=max(total, 1), kv_cache=kv_cache, kv_dtype=engine.kv_dtype)


def generate_one(engine, request: Request, kv_cache: bool = True,
                 should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
    """A single request as a one-request schedule: its `token` events, then `run_finished`."""
    llm = LLMEngine(engine, one_request_config(engine, request, kv_cache))
    stream = RequestStream(llm)
    try:
        llm.add_request(request)
        while True:  # each step's events hold the ones before it (queued, blocks): `route` passes them over
            stop = should_stop is not None and should_stop()
            for _, ev in stream.route(llm.abort(request.request_id) if stop else llm.step()):
                yield ev
                if isinstance(ev, RunFinished):
                    return
    finally:
        llm.close()


def run_batch(engine, requests: Iterable[Request], config: SchedulerConfig,
              arrival_steps: dict[str, int] | None = None, should_stop: Callable[[], bool] | None = None,
              trace: bool = True, clock: Callable[[], float] = time.perf_counter) -> Iterator[TraceEvent]:
    """Drive an LLMEngine over `requests` (each added at its arrival step) until all finish; yields every
    event, ends with `batch_run_finished`, returns the scheduler (`sched = yield from run_batch(...)`, or `drive`)."""
    llm = LLMEngine(engine, config, trace=trace, clock=clock)
    sched = llm.scheduler
    pending = sorted(requests, key=lambda r: (arrival_steps or {}).get(r.request_id, 0))
    try:
        yield from llm.drain()
        while pending or llm.has_work():
            if should_stop is not None and should_stop():
                for r in list(sched.waiting) + list(sched.running):
                    yield from llm.abort(r.request_id)
                break
            while pending and (arrival_steps or {}).get(pending[0].request_id, 0) <= sched.step_count:
                llm.add_request(pending.pop(0))
            if not llm.has_work():  # idle until the next arrival: time still passes in steps
                sched.step_count += 1
                continue
            yield from llm.step()
    finally:
        llm.close()
    yield BatchRunFinished(metrics=llm.run_metrics())
    return sched


def drive(engine, requests: Iterable[Request], config: SchedulerConfig, **kw) -> tuple[Scheduler, list[TraceEvent]]:
    """`run_batch` to completion: (scheduler, all events)."""
    events: list[TraceEvent] = []
    gen = run_batch(engine, requests, config, **kw)
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return stop.value, events
