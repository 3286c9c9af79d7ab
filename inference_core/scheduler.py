"""Batching scheduler over the paged KV cache: continuous (iteration-level) or static batching.

Step-wise API (what a server loop drives):
    sched = Scheduler(engine, SchedulerConfig(mode="continuous", num_blocks=512))
    sched.add_request(Request("r1", prompt_ids, max_new_tokens=32))
    while sched.has_work():
        for ev in sched.step(): ...          # trace events of that step
    sched.abort("r1")                         # frees its blocks at once

Each `step()`:
  1. schedules: running requests first (oldest first; each decode needs room for one more token — when the
     pool is empty the *newest* running request is preempted: blocks freed, back to the front of the waiting
     queue, recomputed later); then admits waiting requests FIFO while sequence slots, the token budget and
     free blocks allow (prefix-cache hits are shared, not recomputed). Static mode admits only when the
     previous batch has completely finished, and keeps early finishers' blocks and slots until then.
  2. runs ONE forward over all scheduled requests' new tokens, flattened into [1, N_total];
  3. samples one token per request, retires finished ones (continuous: blocks freed immediately).
Invariant: after a step, every running request has K/V for all but its last token in its block table.
Not thread-safe: a server that shares one scheduler between clients calls add_request / step / abort from
one loop (or under `engine.lock`), and the model must not run anything else meanwhile.
"""
from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch

from .paged import BlockAllocator, BlockTable, PagedBackend, PagedKVPool, SeqSlice, forward_rows
from .fused_cpu import MAX_FUSED_POSITIONS as MAX_FUSED_STEP_TOKENS
from .runner import runner_for
from .paged_trace import (BatchRunFinished, BatchRunStarted, BatchStep, KVBlock, Preemption, RequestFinished,
                          RequestQueued)
from .prefix_cache import ROOT, PrefixCache, block_hash, chain_hashes
from .sampling import SamplingParams, sample
from .trace import TraceEvent

Mode = Literal["continuous", "static"]


@dataclass(frozen=True)
class SchedulerConfig:
    mode: Mode = "continuous"
    block_size: int = 16
    num_blocks: int = 256  # × 16 tokens × 46,080 B/token (SmolLM2 fp32) ≈ 189 MB
    max_num_seqs: int = 32  # sequence slots per step (static mode: the fixed batch size)
    max_num_batched_tokens: int = 4096  # token budget per step (a longer single prefill still runs alone)
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("continuous", "static"):
            raise ValueError(f"mode must be continuous or static, not {self.mode!r}")
        if self.block_size < 1 or self.num_blocks < 1 or self.max_num_seqs < 1:
            raise ValueError("block_size, num_blocks and max_num_seqs must be positive")


@dataclass
class Request:
    request_id: str
    prompt_ids: list[int]
    max_new_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    stop_at_eos: bool = True
    # state, owned by the scheduler
    output_ids: list[int] = field(default_factory=list)
    status: Literal["new", "waiting", "running", "finished"] = "new"
    finish_reason: str | None = None
    table: BlockTable | None = None
    num_computed: int = 0  # positions whose K/V are in the table
    num_cached_tokens: int = 0  # prefix-cache hit tokens at first admission
    block_hashes: list[bytes] = field(default_factory=list)
    num_preemptions: int = 0
    arrival_time: float = 0.0
    first_scheduled_time: float | None = None
    token_times: list[float] = field(default_factory=list)
    finished_time: float | None = None
    generator: torch.Generator | None = None

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_k, self.top_p)


class Scheduler:
    def __init__(self, engine, config: SchedulerConfig = SchedulerConfig(), trace: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.model = engine.model
        self.cfg = config
        mc = engine.config
        self.pool = PagedKVPool(mc.n_layers, config.num_blocks, mc.n_kv_heads, config.block_size, mc.head_dim,
                                engine.dtype, engine.device)
        self.backend = PagedBackend(self.pool)
        self.allocator = BlockAllocator(config.num_blocks)
        self.prefix = PrefixCache(self.allocator, config.block_size, self._on_evict) if config.prefix_caching else None
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # admission order: the last one is the newest (preempted first)
        self.held: list[Request] = []  # static mode: finished requests still occupying their batch slot
        self.requests: dict[str, Request] = {}
        self.finished: list[Request] = []
        self.step_count = 0
        self.trace = trace
        self.clock = clock
        self.t0 = clock()
        self._events: list[TraceEvent] = []
        self.num_preemptions = 0
        self.step_stats: list[dict] = []  # per step: tokens, kv slots allocated/filled, blocks used, duration
        self._emit(BatchRunStarted(
            model=getattr(engine, "name", "model"), mode=config.mode, block_size=config.block_size,
            num_blocks=config.num_blocks, max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens, prefix_caching=config.prefix_caching,
            n_layers=mc.n_layers, kv_bytes_per_token=mc.kv_bytes_per_token(engine.bytes_per_value),
            kv_bytes_per_block=self.pool.bytes_per_block()))

    # ---- public API -------------------------------------------------------------------------------
    def add_request(self, req: Request) -> None:
        if req.request_id in self.requests:
            raise ValueError(f"duplicate request id {req.request_id!r}")
        if not req.prompt_ids:
            raise ValueError("prompt is empty")
        total = len(req.prompt_ids) + req.max_new_tokens
        if total > self.engine.config.max_seq_len:
            raise ValueError(f"{req.request_id}: {total} positions exceed the model's {self.engine.config.max_seq_len}")
        if -(-total // self.cfg.block_size) > self.cfg.num_blocks:
            raise ValueError(f"{req.request_id}: needs more than all {self.cfg.num_blocks} blocks")
        req.arrival_time = self.clock()
        req.status = "waiting"
        req.table = BlockTable(self.cfg.block_size)
        if req.seed is not None:
            req.generator = torch.Generator().manual_seed(req.seed)
        self.requests[req.request_id] = req
        self.waiting.append(req)
        self._emit(RequestQueued(request_id=req.request_id, step=self.step_count, t_s=self._t(req.arrival_time),
                                 prompt_len=len(req.prompt_ids), max_new_tokens=req.max_new_tokens))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def abort(self, request_id: str) -> list[TraceEvent]:
        """Stop a request now (client went away): its blocks return to the pool. Returns the events."""
        req = self.requests.get(request_id)
        if req is not None and req.status in ("waiting", "running"):
            if req in self.waiting:
                self.waiting.remove(req)
            if req in self.running:
                self.running.remove(req)
            self._finish(req, "aborted", self.clock())
            self._release_static_batch()
        return self._drain()

    def step(self) -> list[TraceEvent]:
        """Schedule, run one batched forward, sample, retire. Returns this step's trace events."""
        scheduled = self._schedule()
        if not scheduled:
            return self._drain()
        t_start = self.clock()
        tokens, positions, rows, slices = [], [], [], []
        for req, n_new in scheduled:
            start = req.num_computed
            slices.append(SeqSlice(len(tokens), n_new, start + n_new, req.table.blocks))
            tokens.extend(req.all_ids[start:start + n_new])
            positions.extend(range(start, start + n_new))
            rows.append(len(tokens) - 1)
        with torch.inference_mode():
            logits = self._forward(scheduled, tokens, positions, rows, slices)
            picked = self._sample(scheduled, logits)
        now = self.clock()
        entries, finished = [], []
        eos = self.engine.config.eos_token_id
        for (req, n_new), token in zip(scheduled, picked):
            phase = "decode" if n_new == 1 and req.output_ids else "prefill"
            req.num_computed += n_new
            req.output_ids.append(token)
            req.token_times.append(now)
            self._publish_full_blocks(req)
            done = len(req.output_ids) >= req.max_new_tokens or (req.stop_at_eos and token == eos)
            entries.append({"request_id": req.request_id, "phase": phase, "n_tokens": n_new,
                            "context_len": req.num_computed, "n_cached": req.num_cached_tokens if phase == "prefill" else 0,
                            "token_id": token, "text": self._text(token), "finished": done})
            if done:
                finished.append((req, "eos" if token == eos and req.stop_at_eos else "length"))
        # The step is recorded with the batch that ran (finishing requests still hold their blocks), then
        # finished requests retire: request_finished and their freed blocks follow the batch_step event.
        self._record_step(entries, len(tokens), t_start, now)
        for req, reason in finished:
            self.running.remove(req)
            self._finish(req, reason, now)
        self._release_static_batch()
        self.step_count += 1
        return self._drain()

    def _forward(self, scheduled, tokens: list[int], positions: list[int], rows: list[int],
                 slices: list[SeqSlice]) -> torch.Tensor:
        """Logits at `rows` of the flattened step: the fused CPU step when it applies, else the reference."""
        fused = runner_for(self.model).fused
        if fused is not None and len(tokens) <= MAX_FUSED_STEP_TOKENS and self.pool.k.dtype == torch.float32:
            seq = [i for i, (_, n_new) in enumerate(scheduled) for _ in range(n_new)]
            width = max(len(req.table.blocks) for req, _ in scheduled)
            tables = [req.table.blocks + [0] * (width - len(req.table.blocks)) for req, _ in scheduled]
            return fused.forward_rows(torch.tensor(tokens), torch.tensor(positions), torch.tensor(seq),
                                      torch.tensor(tables), self.pool.k, self.pool.v, torch.tensor(rows))
        device = self.engine.device
        self.backend.begin_step(slices)
        return forward_rows(self.model, torch.tensor([tokens], device=device), torch.tensor(positions, device=device),
                            self.backend, torch.tensor(rows, device=device))

    def run_metrics(self) -> dict:
        return run_metrics(self)

    # ---- scheduling ---------------------------------------------------------------------------------
    def _schedule(self) -> list[tuple[Request, int]]:
        scheduled: list[tuple[Request, int]] = []
        budget = self.cfg.max_num_batched_tokens
        preempted = False
        self._release_static_batch()
        for req in list(self.running):
            if req.status != "running":  # preempted earlier in this loop
                continue
            n_new = len(req.all_ids) - req.num_computed
            while not self._grow(req, req.num_computed + n_new):
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            else:
                scheduled.append((req, n_new))
                budget -= n_new
        self._release_static_batch()  # a static batch whose last member was just preempted is over
        can_admit = not preempted and (self.cfg.mode == "continuous" or (not self.running and not self.held))
        while can_admit and self.waiting and len(self.running) < self.cfg.max_num_seqs:
            req = self.waiting[0]
            n_new = self._admit(req, budget, first=not scheduled)
            if n_new is None:
                break
            self.waiting.popleft()
            self.running.append(req)
            scheduled.append((req, n_new))
            budget -= n_new
        return scheduled

    def _admit(self, req: Request, budget: int, first: bool) -> int | None:
        """Give `req` blocks for all its tokens (sharing cached prefix blocks); None if it does not fit now."""
        ids = req.all_ids
        bs = self.cfg.block_size
        hits: list[int] = []
        if self.prefix is not None:
            # Never match the last token: its forward must run to produce logits (vLLM does the same).
            hits = self.prefix.match(chain_hashes(ids[:-1], bs))
        n_new = len(ids) - len(hits) * bs
        if n_new > budget and not first:
            return None
        need = -(-len(ids) // bs) - len(hits)
        revived = sum(1 for b in hits if self.allocator.is_free(b))  # leave the free queue when shared
        if need + revived > self.allocator.num_free:
            return None
        if self.prefix is not None and req.first_scheduled_time is None:
            self.prefix.record_query(len(req.prompt_ids), len(hits) * bs)
        req.block_hashes = chain_hashes(ids[:len(hits) * bs], bs)
        for i, b in enumerate(hits):
            rc = self.allocator.incref(b)
            req.table.blocks.append(b)
            self._block_event("shared", b, req.request_id, i, rc)
        if req.first_scheduled_time is None:
            req.first_scheduled_time = self.clock()
            req.num_cached_tokens = len(hits) * bs
        req.num_computed = len(hits) * bs
        self._grow(req, len(ids))
        req.status = "running"
        return n_new

    def _grow(self, req: Request, n_tokens: int) -> bool:
        """Allocate blocks until the table holds `n_tokens` positions; False (nothing taken) if short."""
        need = req.table.blocks_needed(n_tokens)
        if need > self.allocator.num_free:
            return False
        for _ in range(need):
            b = self.allocator.allocate()
            req.table.blocks.append(b)
            self._block_event("allocated", b, req.request_id, len(req.table.blocks) - 1, 1)
        return True

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        n_blocks = len(req.table.blocks)
        self._free_blocks(req)
        req.num_computed = 0
        req.block_hashes = []
        req.status = "waiting"
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        self._emit(Preemption(request_id=req.request_id, step=self.step_count, blocks_freed=n_blocks,
                              tokens_to_recompute=len(req.all_ids)))

    def _free_blocks(self, req: Request) -> None:
        # Reverse order: a prefix's tail blocks are the least likely to be shared, so they sit nearer the
        # head of the LRU free queue and are evicted first (vLLM frees in the same order).
        for i in range(len(req.table.blocks) - 1, -1, -1):
            b = req.table.blocks[i]
            rc = self.allocator.free(b)
            self._block_event("freed", b, req.request_id, i, rc)
        req.table.blocks.clear()

    def _finish(self, req: Request, reason: str, now: float) -> None:
        req.status = "finished"
        req.finish_reason = reason
        req.finished_time = now
        self.finished.append(req)
        if self.cfg.mode == "static" and reason != "aborted":
            self.held.append(req)  # keeps its slot and blocks until the whole batch is done
        else:
            self._free_blocks(req)
        self._emit(request_finished_event(req, self))

    def _release_static_batch(self) -> None:
        if self.cfg.mode == "static" and not self.running and self.held:
            for req in self.held:
                self._free_blocks(req)
            self.held.clear()

    def _publish_full_blocks(self, req: Request) -> None:
        if self.prefix is None:
            return
        bs = self.cfg.block_size
        ids = req.all_ids
        for i in range(len(req.block_hashes), req.num_computed // bs):
            parent = req.block_hashes[-1] if req.block_hashes else ROOT
            h = block_hash(parent, ids[i * bs:(i + 1) * bs])
            req.block_hashes.append(h)
            b = req.table.blocks[i]
            if self.prefix.register(b, h):
                self._block_event("cached", b, req.request_id, i, self.allocator.refcount[b])

    def _sample(self, scheduled, logits: torch.Tensor) -> list[int]:
        if all(req.temperature <= 0 for req, _ in scheduled):
            return logits.argmax(-1).tolist()
        return [sample(logits[i], req.sampling, req.generator) for i, (req, _) in enumerate(scheduled)]

    # ---- events and stats ---------------------------------------------------------------------------
    def _t(self, t: float) -> float:
        return t - self.t0

    def _text(self, token: int) -> str:
        tok = getattr(self.engine, "tokenizer", None)
        return tok.token_text(token) if tok is not None else str(token)

    def _decode(self, ids: list[int]) -> str:
        tok = getattr(self.engine, "tokenizer", None)
        return tok.decode(ids, skip_special=True) if tok is not None else ""

    def _emit(self, ev: TraceEvent) -> None:
        if self.trace:
            self._events.append(ev)

    def _drain(self) -> list[TraceEvent]:
        out, self._events = self._events, []
        return out

    def _block_event(self, op: str, block: int, request_id: str | None, index: int | None, rc: int) -> None:
        if self.trace:
            self._events.append(KVBlock(op=op, block=block, request_id=request_id, logical_index=index,
                                        refcount=rc, step=self.step_count))

    def _on_evict(self, block: int) -> None:
        self._block_event("evicted", block, None, None, 0)

    def kv_slots(self) -> tuple[int, int]:
        """(allocated, filled) token slots over in-use blocks, each physical block counted once."""
        bs = self.cfg.block_size
        filled: dict[int, int] = {}
        for req in self.running + self.held:
            for i, b in enumerate(req.table.blocks):
                n = min(bs, max(0, req.num_computed - i * bs))
                if n > filled.get(b, -1):
                    filled[b] = n
        return self.allocator.num_used * bs, sum(filled.values())

    def _record_step(self, entries: list[dict], n_tokens: int, t_start: float, now: float) -> None:
        allocated, filled = self.kv_slots()
        reserved_req = sum(len(r.prompt_ids) + r.max_new_tokens for r in self.running + self.held)
        live = len(self.running) + len(self.held)
        stats = {"n_tokens": n_tokens, "n_seqs": len(entries), "duration_s": now - t_start,
                 "blocks_used": self.allocator.num_used, "slots_allocated": allocated, "slots_filled": filled,
                 "reserved_request_max": reserved_req, "reserved_model_max": live * self.engine.config.max_seq_len,
                 "lengths": [r.num_computed for r in self.running + self.held]}
        self.step_stats.append(stats)
        if self.trace:
            self._events.append(BatchStep(
                step=self.step_count, t_s=self._t(now), duration_s=now - t_start, entries=entries,
                idle=[r.request_id for r in self.held], n_tokens=n_tokens, running=len(self.running),
                waiting=len(self.waiting), blocks_used=self.allocator.num_used, blocks_free=self.allocator.num_free,
                blocks_cached=self.prefix.num_cached if self.prefix else 0,
                kv_usage=self.allocator.num_used / self.cfg.num_blocks, kv_slots_allocated=allocated,
                kv_slots_filled=filled, contiguous_slots_reserved=reserved_req))


def request_finished_event(req: Request, sched: Scheduler) -> RequestFinished:
    m = request_metrics(req)
    return RequestFinished(
        request_id=req.request_id, token_ids=list(req.output_ids),
        text=sched._decode(req.output_ids),
        finish_reason=req.finish_reason, n_prompt_tokens=len(req.prompt_ids), n_cached_tokens=req.num_cached_tokens,
        n_generated=len(req.output_ids), num_preemptions=req.num_preemptions, arrival_s=sched._t(req.arrival_time),
        first_token_s=sched._t(req.token_times[0]) if req.token_times else None,
        finished_s=sched._t(req.finished_time), ttft_s=m["ttft_s"], tpot_s=m["tpot_s"], e2e_s=m["e2e_s"],
        queue_s=m["queue_s"], itl_s=m["itl_s"])


def request_metrics(req: Request) -> dict:
    """vLLM's per-request definitions: TTFT from arrival; TPOT = (e2e − TTFT)/(n − 1); ITL gaps."""
    times = req.token_times
    ttft = times[0] - req.arrival_time if times else None
    e2e = (req.finished_time or (times[-1] if times else req.arrival_time)) - req.arrival_time
    n = len(times)
    tpot = (e2e - ttft) / (n - 1) if n > 1 and ttft is not None else 0.0
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "itl_s": [b - a for a, b in zip(times, times[1:])],
            "queue_s": (req.first_scheduled_time - req.arrival_time) if req.first_scheduled_time else None}


def _summary(values: list[float], name: str) -> dict:
    if not values:
        return {}
    vs = sorted(values)
    p99 = vs[min(len(vs) - 1, int(round(0.99 * (len(vs) - 1))))]
    return {f"mean_{name}_ms": 1000 * statistics.fmean(vs), f"median_{name}_ms": 1000 * statistics.median(vs),
            f"p99_{name}_ms": 1000 * p99}


def run_metrics(sched: Scheduler) -> dict:
    """Run-level metrics named as `vllm bench serve` prints them, plus KV-pool figures.

    duration = first arrival → last finish. output_throughput = generated tokens / duration;
    total_token_throughput = (prompt + generated) / duration. kv_waste_pct: allocated-but-unfilled slots /
    allocated slots, averaged over steps; contiguous_*: the same ratio had every live request reserved
    prompt + max_new_tokens (request max) or the model's whole context (model max) up front.
    prefix_cache_hit_rate: hit tokens / prompt tokens looked up.
    """
    done = [r for r in sched.finished if r.finish_reason != "aborted"]
    out: dict = {"mode": sched.cfg.mode, "completed": len(done), "num_steps": sched.step_count}
    if not done:
        return out
    start = min(r.arrival_time for r in done)
    end = max(r.finished_time for r in done)
    duration = max(end - start, 1e-9)
    n_in = sum(len(r.prompt_ids) for r in done)
    n_out = sum(len(r.output_ids) for r in done)
    per = [request_metrics(r) for r in done]
    out.update({
        "duration_s": duration, "total_input_tokens": n_in, "total_output_tokens": n_out,
        "request_throughput": len(done) / duration, "output_throughput": n_out / duration,
        "total_token_throughput": (n_in + n_out) / duration, "num_preemptions": sched.num_preemptions,
    })
    out.update(_summary([m["ttft_s"] for m in per if m["ttft_s"] is not None], "ttft"))
    out.update(_summary([m["tpot_s"] for m in per if len(m["itl_s"]) > 0], "tpot"))
    out.update(_summary([x for m in per for x in m["itl_s"]], "itl"))
    out.update(_summary([m["e2e_s"] for m in per], "e2el"))
    stats = sched.step_stats
    if stats:
        alloc = sum(s["slots_allocated"] for s in stats)
        filled = sum(s["slots_filled"] for s in stats)
        out["kv_waste_pct"] = 100 * (alloc - filled) / alloc if alloc else 0.0
        for key in ("request_max", "model_max"):
            reserved = sum(s[f"reserved_{key}"] for s in stats)
            out[f"contiguous_{key}_waste_pct"] = 100 * (reserved - filled) / reserved if reserved else 0.0
        out["kv_usage_mean"] = statistics.fmean(s["blocks_used"] for s in stats) / sched.cfg.num_blocks
        out["kv_usage_peak"] = max(s["blocks_used"] for s in stats) / sched.cfg.num_blocks
        out["mean_batch_size"] = statistics.fmean(s["n_seqs"] for s in stats)
        out["mean_tokens_per_step"] = statistics.fmean(s["n_tokens"] for s in stats)
    out["blocks_free_at_end"] = sched.allocator.num_free
    if sched.prefix is not None:
        out.update({"prefix_cache_queries": sched.prefix.query_tokens, "prefix_cache_hits": sched.prefix.hit_tokens,
                    "prefix_cache_hit_rate": sched.prefix.hit_rate})
    return out


def run_batch(engine, requests: Iterable[Request], config: SchedulerConfig,
              arrival_steps: dict[str, int] | None = None, should_stop: Callable[[], bool] | None = None,
              trace: bool = True, clock: Callable[[], float] = time.perf_counter) -> Iterator[TraceEvent]:
    """Drive a scheduler over `requests` (each added when the step counter reaches its arrival step, default
    0) until all finish; yields every event, ending with `batch_run_finished`. Returns the scheduler via
    StopIteration.value (use `sched = yield from run_batch(...)` or `drive`)."""
    sched = Scheduler(engine, config, trace=trace, clock=clock)
    pending = sorted(requests, key=lambda r: (arrival_steps or {}).get(r.request_id, 0))
    yield from sched._drain()
    while pending or sched.has_work():
        if should_stop is not None and should_stop():
            for r in list(sched.waiting) + list(sched.running):
                yield from sched.abort(r.request_id)
            break
        while pending and (arrival_steps or {}).get(pending[0].request_id, 0) <= sched.step_count:
            sched.add_request(pending.pop(0))
        if not sched.has_work():  # idle until the next arrival: time still passes in steps
            sched.step_count += 1
            continue
        yield from sched.step()
    yield BatchRunFinished(metrics=sched.run_metrics())
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


# ---- CLI: python -m inference_core batch ... -------------------------------------------------------------
def read_prompts(path: str, jsonl: bool = False) -> list[dict]:
    """One request per non-blank line. Text (default): the line is the prompt, `\\n` for a newline.
    JSON lines (`jsonl`): each line an object {"prompt", "max_new_tokens"?, "arrival_step"?, "id"?}."""
    import json

    out = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if not jsonl:
                out.append({"prompt": line.replace("\\n", "\n")})
                continue
            try:
                spec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {number}: not JSON ({exc.msg})") from None
            if not isinstance(spec, dict) or not isinstance(spec.get("prompt"), str):
                raise ValueError(f"{path} line {number}: needs an object with a \"prompt\" string")
            out.append(spec)
    return out


def add_batch(sub) -> None:
    from .cli import add_model_arg

    p = sub.add_parser("batch", help="serve a file of prompts with the batching scheduler")
    add_model_arg(p)
    p.add_argument("--prompts-file", required=True,
                   help="one prompt per line; JSON lines with --jsonl or a .jsonl file")
    p.add_argument("--jsonl", action="store_true",
                   help='read the file as JSON lines: {"prompt", "max_new_tokens"?, "arrival_step"?, "id"?}')
    p.add_argument("--mode", choices=["continuous", "static"], default="continuous")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-blocks", type=int, default=256)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--max-num-batched-tokens", type=int, default=4096)
    p.add_argument("--prefix-cache", action="store_true")
    p.add_argument("--max-new-tokens", type=int, default=32, help="default for lines that do not set it")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None, help="request i samples with seed + i")
    p.add_argument("--chat", action="store_true", help="apply the model's chat template")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_batch)


def cmd_batch(args) -> int:
    import json
    import sys

    from .engine import load_engine

    engine = load_engine(args.model)
    config = SchedulerConfig(mode=args.mode, block_size=args.block_size, num_blocks=args.num_blocks,
                             max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                             prefix_caching=args.prefix_cache)
    specs = read_prompts(args.prompts_file, jsonl=args.jsonl or args.prompts_file.endswith(".jsonl"))
    if not specs:
        raise ValueError(f"no prompts in {args.prompts_file}")
    reqs, arrivals = [], {}
    for i, spec in enumerate(specs):
        rid = str(spec.get("id", f"r{i}"))
        ids = engine.encode_prompt(spec["prompt"], args.chat)
        reqs.append(Request(rid, ids, max_new_tokens=int(spec.get("max_new_tokens", args.max_new_tokens)),
                            temperature=args.temperature, seed=None if args.seed is None else args.seed + i))
        arrivals[rid] = int(spec.get("arrival_step", 0))
    sched, _ = drive(engine, reqs, config, arrival_steps=arrivals, trace=False)
    results = []
    for spec, req in zip(specs, reqs):
        m = request_metrics(req)
        results.append({"id": req.request_id, "prompt": spec["prompt"], "prompt_token_ids": req.prompt_ids,
                        "token_ids": req.output_ids, "text": engine.tokenizer.decode(req.output_ids, skip_special=True),
                        "finish_reason": req.finish_reason, "n_cached_tokens": req.num_cached_tokens,
                        "num_preemptions": req.num_preemptions,
                        **{k: v for k, v in m.items() if k != "itl_s"}})
    metrics = sched.run_metrics()
    if args.json:
        print(json.dumps({"config": config.__dict__, "requests": results, "metrics": metrics}))
    else:
        for r in results:
            print(f"[{r['id']}] {r['prompt']!r} → {r['text']!r}")
        print(f"\n{metrics['completed']} requests in {metrics['duration_s']:.2f} s · "
              f"{metrics['output_throughput']:.1f} output tok/s · TTFT mean {metrics['mean_ttft_ms']:.0f} ms · "
              f"KV waste {metrics['kv_waste_pct']:.1f}% · preemptions {metrics['num_preemptions']}", file=sys.stderr)
    return 0
