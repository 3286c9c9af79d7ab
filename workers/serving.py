"""Serving several callers from one engine: a service thread batches their requests step by step.

Celery runs demo tasks in threads; if each thread ran its own forward passes, concurrent students would
take turns and a 2-core CPU would thrash. Instead every thread submits to one `EngineService`, whose
thread owns a continuous-batching `LLMEngine` (paged KV cache) and calls its `step()`: ONE forward per step
for all running requests. Callers get the same `run_started` / `token` / `run_finished` events as
`LoadedModel.generate_events`, with `batch_size` telling how many requests shared each step.

Invariant: only the service thread touches the scheduler and the model; other threads talk to it
through queues.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from inference_core.engine.llm_engine import LLMEngine, RequestStream
from inference_core.engine.loaded_model import GenerationParams, LoadedModel, load_engine
from inference_core.engine.paged_trace import BatchStep, RequestFinished
from inference_core.engine.scheduler import Request, SchedulerConfig
from inference_core.engine.trace import RunFinished, TraceEvent
from inference_core.model.config import DEFAULT_MODEL

log = logging.getLogger(__name__)

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
    def __init__(self, engine: LoadedModel, config: SchedulerConfig | None = None) -> None:
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
            raise ValueError("the batching service always uses the KV cache; call LoadedModel.generate_events")
        request_id = f"r{next(self._ids)}"
        request = Request(request_id, list(prompt_ids), params)
        stream: queue.Queue = queue.Queue()
        yield self.engine.run_started(prompt_ids, params)
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
        llm, streams = self._new_engine()
        while True:
            block = not llm.has_work()
            try:
                while True:
                    op, arg, stream = self._inbox.get(block=block, timeout=None if block else 0)
                    block = False
                    if op == "add":
                        try:
                            llm.add_request(arg)
                            self._streams[arg.request_id] = stream
                        except ValueError as exc:
                            stream.put(exc)
                    elif op == "abort":
                        self._route(llm, streams, llm.abort(arg))
                        self._update_stats(llm, [], stepped=False)  # an idle dashboard must not show it
            except queue.Empty:
                pass
            if not llm.has_work():
                continue
            try:
                events = llm.step()
            except Exception as exc:  # noqa: BLE001 — every waiting caller must hear about it
                for stream in self._streams.values():
                    stream.put(exc)
                self._streams.clear()
                llm.close()
                llm, streams = self._new_engine()
                continue
            self._route(llm, streams, events)
            self._update_stats(llm, events)

    def _new_engine(self) -> tuple[LLMEngine, RequestStream]:
        llm = LLMEngine(self.engine, self.config, trace=True)
        llm.drain()
        return llm, RequestStream(llm)

    def _route(self, llm: LLMEngine, streams: RequestStream, events: list[TraceEvent]) -> None:
        """Hand each caller its own token / run_finished events."""
        sched = llm.scheduler
        for request_id, ev in streams.route(events):
            stream = self._streams.get(request_id)
            if stream is None:
                continue
            stream.put(ev)
            if isinstance(ev, RunFinished):
                del self._streams[request_id]
                sched.requests.pop(request_id, None)
                stream.put(_DONE)
        if sched.finished:
            sched.finished.clear()  # the service runs forever: keep no history

    def _update_stats(self, llm: LLMEngine, events: list[TraceEvent], stepped: bool = True) -> None:
        sched = llm.scheduler
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


class LoadedModels:
    """A process's loaded models and their batching services, each made once and kept for the next run: owned by
    whoever owns the process (a worker holds one from its start; a test session, a bench script, one each), never
    by this module. Thread-safe: concurrent first asks for a model load it once.

    `get` loads `name` on `device` (`load_engine`: weights from the safetensors cache, the compiled kernels the
    first time in the process), `service` starts the model's `EngineService`; a second run asks again and gets
    the same objects, so it neither reloads weights nor restarts a service."""

    def __init__(self, load: Callable[..., LoadedModel] = load_engine) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._models: dict[tuple[str, str | None], LoadedModel] = {}
        self._services: dict[str, EngineService] = {}

    def get(self, name: str = DEFAULT_MODEL, device: str | None = None) -> LoadedModel:
        """Model `name` on `device` (None: the process's default device), loaded on first ask."""
        with self._lock:
            if (name, device) not in self._models:
                t0 = time.perf_counter()
                model = self._models[name, device] = self._load(name, device=device)
                log.info("engine %s loaded on %s in %.1fs", name, getattr(model, "device", device),
                         time.perf_counter() - t0)
            return self._models[name, device]

    def loaded(self, name: str = DEFAULT_MODEL, device: str | None = None) -> LoadedModel | None:
        """Model `name` if it is loaded already (never loads: for stats readers)."""
        return self._models.get((name, device))

    def service(self, name: str = DEFAULT_MODEL) -> EngineService:
        """The batching service of model `name` on the default device, started on first ask."""
        model = self.get(name)
        with self._lock:
            if name not in self._services:
                self._services[name] = EngineService(model)
            return self._services[name]

    def existing_service(self, name: str = DEFAULT_MODEL) -> EngineService | None:
        """The service for `name` if one was started (never starts it: for stats readers)."""
        return self._services.get(name)
