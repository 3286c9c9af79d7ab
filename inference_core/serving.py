"""Serving several callers from one engine: a service thread batches their requests step by step.

Celery runs demo tasks in threads; if each thread ran its own forward passes, concurrent students would
take turns and a 2-core CPU would thrash. Instead every thread submits to one `EngineService`, whose
thread owns a continuous-batching `Scheduler` (paged KV cache) and runs ONE forward per step for all
running requests. Callers get the same `run_started` / `token` / `run_finished` events as
`Engine.generate_events`, with `batch_size` telling how many requests shared each step.

Invariant: only the service thread touches the scheduler and the model; other threads talk to it
through queues.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from .config import DEFAULT_MODEL
from .engine import Engine, GenerationParams, step_cost
from .paged_trace import BatchStep, RequestFinished
from .scheduler import Request, Scheduler, SchedulerConfig
from .trace import RunFinished, RunStarted, TokenStep, TraceEvent

_DONE = object()


@dataclass
class ServiceStats:
    """What the engine dashboard shows; refreshed after every step."""

    batch_size: int = 0
    running: int = 0
    waiting: int = 0
    blocks_used: int = 0
    blocks_total: int = 0
    steps: int = 0
    completed: int = 0
    tokens_per_s: float = 0.0  # generated tokens over the last few seconds
    max_batch_size: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class EngineService:
    def __init__(self, engine: Engine, config: SchedulerConfig | None = None) -> None:
        self.engine = engine
        self.config = config or SchedulerConfig(num_blocks=384, max_num_seqs=16, prefix_caching=True)
        self.stats = ServiceStats(blocks_total=self.config.num_blocks)
        self._inbox: queue.Queue = queue.Queue()
        self._streams: dict[str, queue.Queue] = {}
        self._ids = itertools.count()
        self._recent: deque[tuple[float, int]] = deque()  # (time, tokens generated) for tokens_per_s
        self._thread = threading.Thread(target=self._loop, name="engine-service", daemon=True)
        self._thread.start()

    # ---- caller side (any thread) ------------------------------------------------------------------
    def generate(self, prompt: str, params: GenerationParams,
                 should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        return self.generate_events(self.engine.encode_prompt(prompt, params.chat), params, should_stop)

    def generate_events(self, prompt_ids: list[int], params: GenerationParams,
                        should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        if not params.use_cache:
            raise ValueError("the batching service always uses the KV cache; call Engine.generate_events")
        cfg = self.engine.config
        request_id = f"r{next(self._ids)}"
        request = Request(request_id, list(prompt_ids), max_new_tokens=params.max_new_tokens,
                          temperature=params.temperature, top_k=params.top_k, top_p=params.top_p, seed=params.seed,
                          stop_at_eos=params.stop_at_eos)
        stream: queue.Queue = queue.Queue()
        bpv = self.engine.bytes_per_value
        yield RunStarted(
            model=self.engine.name, device=str(self.engine.device), dtype=str(self.engine.dtype).removeprefix("torch."),
            prompt_token_ids=list(prompt_ids), prompt_tokens=[self.engine.tokenizer.token_text(t) for t in prompt_ids],
            params=asdict(params), n_layers=cfg.n_layers, kv_bytes_per_token=cfg.kv_bytes_per_token(bpv),
        )
        self._inbox.put(("add", request, stream))
        finished = False
        try:
            while True:
                if should_stop is not None and should_stop():
                    self._inbox.put(("abort", request_id, None))
                    should_stop = None  # the abort's run_finished (cancelled) arrives through the stream
                try:
                    item = stream.get(timeout=0.05)
                except queue.Empty:
                    continue
                if item is _DONE:
                    finished = True
                    return
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                yield item
        finally:
            if not finished:  # the caller closed the generator (client gone): free the blocks now
                self._inbox.put(("abort", request_id, None))

    # ---- service thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        sched = Scheduler(self.engine, self.config, trace=True)
        sched._drain()
        while True:
            block = not sched.has_work()
            try:
                while True:
                    op, arg, stream = self._inbox.get(block=block, timeout=None if block else 0)
                    block = False
                    if op == "add":
                        try:
                            sched.add_request(arg)
                            self._streams[arg.request_id] = stream
                        except ValueError as exc:
                            stream.put(exc)
                    elif op == "abort":
                        self._route(sched, sched.abort(arg))
                        self._update_stats(sched, [], stepped=False)  # an idle dashboard must not show it
            except queue.Empty:
                pass
            if not sched.has_work():
                continue
            try:
                events = sched.step()
            except Exception as exc:  # noqa: BLE001 — every waiting caller must hear about it
                for stream in self._streams.values():
                    stream.put(exc)
                self._streams.clear()
                sched = Scheduler(self.engine, self.config, trace=True)
                sched._drain()
                continue
            self._route(sched, events)
            self._update_stats(sched, events)

    def _route(self, sched: Scheduler, events: list[TraceEvent]) -> None:
        """Turn the scheduler's batch events into each caller's own token / run_finished events."""
        cfg = self.engine.config
        bpv = self.engine.bytes_per_value
        per_token = cfg.kv_bytes_per_token(bpv)
        # The scheduler emits a request's `request_finished` before the step's `batch_step` that carries its
        # last token: deliver tokens first so a caller's stream ends with run_finished.
        for ev in sorted(events, key=lambda e: not isinstance(e, BatchStep)):
            if isinstance(ev, BatchStep):
                for entry in ev.entries:
                    stream = self._streams.get(entry["request_id"])
                    if stream is None:
                        continue
                    req = sched.requests[entry["request_id"]]
                    context = entry["context_len"]
                    flops, moved = step_cost(cfg, entry["n_tokens"], context, 1, bpv, True)
                    per_layer = context * per_token // cfg.n_layers
                    stream.put(TokenStep(
                        phase=entry["phase"], step=len(req.output_ids) - 1, token_id=entry["token_id"], text=entry["text"], position=context,
                        n_input_tokens=entry["n_tokens"], step_time_s=ev.duration_s,
                        kv_bytes_total=per_layer * cfg.n_layers, kv_bytes_per_layer=[per_layer] * cfg.n_layers,
                        flops=flops, bytes_moved=moved, batch_size=len(ev.entries),
                    ))
            elif isinstance(ev, RequestFinished):
                stream = self._streams.pop(ev.request_id, None)
                if stream is None:
                    continue
                req = sched.requests.pop(ev.request_id)
                gaps = ev.itl_s or []
                reason = {"aborted": "cancelled"}.get(ev.finish_reason, ev.finish_reason)
                stream.put(RunFinished(
                    token_ids=list(ev.token_ids), text=ev.text, finish_reason=reason,
                    n_prompt_tokens=ev.n_prompt_tokens, n_generated=ev.n_generated, ttft_s=ev.ttft_s or 0.0,
                    tpot_s=ev.tpot_s or 0.0, tokens_per_s=len(gaps) / sum(gaps) if gaps and sum(gaps) > 0 else 0.0,
                    kv_bytes=0 if reason == "cancelled" else (len(req.all_ids) - 1) * per_token,
                ))
                stream.put(_DONE)
        if sched.finished:
            sched.finished.clear()  # the service runs forever: keep no history

    def _update_stats(self, sched: Scheduler, events: list[TraceEvent], stepped: bool = True) -> None:
        now = time.monotonic()
        for ev in events:
            if isinstance(ev, BatchStep):
                self.stats.batch_size = len(ev.entries)
                self.stats.max_batch_size = max(self.stats.max_batch_size, len(ev.entries))
                self._recent.append((now, len(ev.entries)))
            elif isinstance(ev, RequestFinished):
                self.stats.completed += 1
        while self._recent and now - self._recent[0][0] > 5.0:
            self._recent.popleft()
        span = now - self._recent[0][0] if len(self._recent) > 1 else 0.0
        self.stats.tokens_per_s = sum(n for _, n in self._recent) / span if span > 0 else 0.0
        self.stats.running = len(sched.running)
        if not sched.running:
            self.stats.batch_size = 0  # idle: the last step's batch is history, not the current batch
        self.stats.waiting = len(sched.waiting)
        self.stats.blocks_used = sched.allocator.num_used
        self.stats.steps += stepped


_services: dict[str, EngineService] = {}
_services_lock = threading.Lock()


def existing_service(name: str = DEFAULT_MODEL) -> EngineService | None:
    """The service for `name` if this process has started one (never starts it: for stats readers)."""
    return _services.get(name)


def get_service(name: str = DEFAULT_MODEL) -> EngineService:
    """The process-wide service for `name` (one per worker process, like the engine itself)."""
    from .engine import load_engine

    with _services_lock:
        if name not in _services:
            _services[name] = EngineService(load_engine(name))
        return _services[name]
