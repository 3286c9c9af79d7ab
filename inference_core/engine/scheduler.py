"""Batching scheduler over the paged KV cache: continuous (iteration-level) or static batching.
Invariant: after a step, every running request has K/V for all but its last token, and no block past them."""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..model.config import ModelConfig
from .metrics import request_metrics, run_metrics
from .paged import KV_DTYPES, BlockAllocator, BlockTable, SeqSlice
from .paged_trace import BatchStep, KVBlock, Preemption, RequestFinished, RequestQueued
from .prefix_cache import ROOT, PrefixCache, chain_hashes
from .request import Request, ScheduledBatch
from .trace import TraceEvent

__all__ = ["Mode", "Request", "ScheduledBatch", "Scheduler", "SchedulerConfig", "request_metrics", "run_metrics"]

Mode = Literal["continuous", "static"]


@dataclass(frozen=True)
class SchedulerConfig:
    mode: Mode = "continuous"
    block_size: int = 16
    num_blocks: int = 256  # × 16 tokens × 46,080 B/token (SmolLM2 fp32) ≈ 189 MB
    max_num_seqs: int = 32  # sequence slots per step (static mode: the fixed batch size)
    max_num_batched_tokens: int = 4096  # token budget per step (a longer single prefill still runs alone)
    prefix_caching: bool = False
    kv_cache: bool = True  # False: keep no K/V between steps; every step re-feeds the whole sequence
    kv_dtype: str = "auto"  # "int8": the pool stores K/V as int8 + a scale per token and head (paged.py)

    def __post_init__(self) -> None:
        if self.mode not in ("continuous", "static"):
            raise ValueError(f"mode must be continuous or static, not {self.mode!r}")
        if self.prefix_caching and not self.kv_cache:
            raise ValueError("prefix caching shares cached K/V: it needs kv_cache=True")
        if self.block_size < 1 or self.num_blocks < 1 or self.max_num_seqs < 1:
            raise ValueError("block_size, num_blocks and max_num_seqs must be positive")
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, not {self.kv_dtype!r}")


class Scheduler:
    def __init__(self, model_config: ModelConfig, config: SchedulerConfig = SchedulerConfig(), tokenizer=None,
                 trace: bool = True, clock: Callable[[], float] = time.perf_counter) -> None:
        self.model_config = model_config
        self.cfg = config
        self.tokenizer = tokenizer
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

    # ---- public API -------------------------------------------------------------------------------
    def add_request(self, req: Request) -> None:
        if req.request_id in self.requests:
            raise ValueError(f"duplicate request id {req.request_id!r}")
        if not req.prompt_ids:
            raise ValueError("prompt is empty")
        total = len(req.prompt_ids) + req.params.max_new_tokens
        if total > self.model_config.max_seq_len:
            raise ValueError(f"{req.request_id}: {total} positions exceed the model's {self.model_config.max_seq_len}")
        if -(-total // self.cfg.block_size) > self.cfg.num_blocks:
            raise ValueError(f"{req.request_id}: needs more than all {self.cfg.num_blocks} blocks")
        if req.spec is not None and not self.cfg.kv_cache:
            raise ValueError(f"{req.request_id}: speculative decoding verifies against cached K/V: it needs kv_cache")
        req.arrival_time = self.clock()
        req.status = "waiting"
        req.table = BlockTable(self.cfg.block_size)
        req.generator = req.params.generator()
        self.requests[req.request_id] = req
        self.waiting.append(req)
        self.emit(RequestQueued(request_id=req.request_id, step=self.step_count, t_s=self._t(req.arrival_time),
                                prompt_len=len(req.prompt_ids), max_new_tokens=req.params.max_new_tokens))

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def abort(self, request_id: str) -> list[TraceEvent]:
        """Stop a request now (client went away): its blocks return to the pool. Returns the events."""
        req = self.requests.get(request_id)
        if req is not None and req.status in ("waiting", "running"):  # a request sits in the queue its status names
            (self.waiting if req.status == "waiting" else self.running).remove(req)
            self._finish(req, "aborted", self.clock())
            self._release_static_batch()
        return self.drain()

    def to_draft(self) -> list[tuple[Request, int]]:
        """The draft phase: speculative requests about to verify, each with k capped at its tokens left − 1."""
        return [(r, max(0, min(r.spec.k, r.params.max_new_tokens - len(r.output_ids) - 1)))
                for r in self.running if r.verifies(r.num_computed)]

    def schedule(self) -> ScheduledBatch | None:
        """Decide this step's batch (allocating, sharing or preempting blocks); None when nothing can run."""
        scheduled = self._schedule()
        if not scheduled:
            return None
        tokens, positions, seq, rows, slices, n_rows, drafted = [], [], [], [], [], [], []
        for j, (req, n_new) in enumerate(scheduled):
            start = req.num_computed
            verify = req.verifies(start)
            slices.append(SeqSlice(len(tokens), n_new, start + n_new, req.table.blocks))
            tokens.extend(req.all_ids[start:] + req.drafted if verify else req.all_ids[start:start + n_new])
            positions.extend(range(start, start + n_new))
            seq.extend([j] * n_new)
            n_rows.append(1 + len(req.drafted) if verify else 1)
            rows.extend(range(len(tokens) - n_rows[-1], len(tokens)))
            drafted.append(list(req.drafted) if verify else None)
        return ScheduledBatch(tokens, positions, seq, rows, slices, requests=[r for r, _ in scheduled],
                              n_new=[n for _, n in scheduled], n_rows=n_rows, drafted=drafted)

    def postprocess(self, batch: ScheduledBatch, outputs: list, t_start: float) -> list[TraceEvent]:
        """Append each request's new token(s), retire finished ones; the step's trace events."""
        now = self.clock()
        entries, finished = [], []
        eos = self.model_config.eos_token_id
        for req, n_new, out, drafted in zip(batch.requests, batch.n_new, outputs, batch.drafted):
            req.num_computed += n_new
            extra: dict = {}
            if drafted is not None:  # a verify: the acceptance rule, then the rejected guesses are rolled back…
                n_accepted, emitted = req.spec.judge(req, drafted, out, eos, now - t_start)
                req.num_computed -= len(drafted) - n_accepted
                self._truncate(req)  # … and the blocks past the new end go back to the pool
                req.drafted, phase = [], "verify" if n_new == 1 + len(drafted) else "prefill"
                extra = {"emitted": emitted, "n_drafted": len(drafted), "n_accepted": n_accepted}
            else:  # a recompute after preemption is a prefill; without a cache every step re-feeds everything
                emitted = [out]
                phase = "decode" if req.output_ids and (n_new == 1 or not self.cfg.kv_cache) else "prefill"
            req.output_ids.extend(emitted)
            req.token_times.extend([now] * len(emitted))
            self._publish_full_blocks(req)
            token = emitted[-1] if emitted else None
            stop = req.params.stop_at_eos and token == eos
            done = bool(emitted) and (len(req.output_ids) >= req.params.max_new_tokens or stop)
            entries.append({"request_id": req.request_id, "phase": phase, "n_tokens": n_new,
                            "context_len": req.num_computed, "n_cached": req.num_cached_tokens if phase == "prefill" else 0,
                            "token_id": token, "text": self._text(token) if emitted else "", "finished": done, **extra})
            if not self.cfg.kv_cache:
                req.num_computed = 0  # nothing kept: the next step recomputes every position
            if done:
                finished.append((req, "eos" if stop else "length"))
        # The step is recorded with the batch that ran (finishing requests still hold their blocks), then
        # finished requests retire: request_finished and their freed blocks follow the batch_step event.
        self._record_step(entries, len(batch.tokens), t_start, now)
        for req, reason in finished:
            self.running.remove(req)
            self._finish(req, reason, now)
        self._release_static_batch()
        self.step_count += 1
        return self.drain()

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
            n_new = req.new_tokens(req.num_computed)
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
        n_new = req.new_tokens(len(hits) * bs)
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
        self._grow(req, req.num_computed + n_new)
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
        self._truncate(req, keep=0)
        req.num_computed = 0
        req.block_hashes = []
        req.drafted = []  # guesses for a verify that will not run: the draft re-syncs on its next proposal
        req.status = "waiting"
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        self.emit(Preemption(request_id=req.request_id, step=self.step_count, blocks_freed=n_blocks,
                              tokens_to_recompute=len(req.all_ids)))

    def _truncate(self, req: Request, keep: int | None = None) -> None:
        """Free the blocks past the first `keep`; by default those past the one holding position num_computed − 1
        (a verify's rejected guesses)."""
        keep = -(-req.num_computed // self.cfg.block_size) if keep is None else keep
        # Last first: a prefix's tail blocks are the least likely to be shared, so they sit nearer the head of the
        # LRU free queue and are evicted first (vLLM frees in the same order).
        while len(req.table.blocks) > keep:
            b = req.table.blocks.pop()
            self._block_event("freed", b, req.request_id, len(req.table.blocks), self.allocator.free(b))

    def _finish(self, req: Request, reason: str, now: float) -> None:
        req.status = "finished"
        req.finish_reason = reason
        req.finished_time = now
        self.finished.append(req)
        if req.spec is not None:
            req.spec.release()
        if self.cfg.mode == "static" and reason != "aborted":
            self.held.append(req)  # keeps its slot and blocks until the whole batch is done
        else:
            self._truncate(req, keep=0)
        self.emit(request_finished_event(req, self))

    def _release_static_batch(self) -> None:
        if self.cfg.mode == "static" and not self.running and self.held:
            for req in self.held:
                self._truncate(req, keep=0)
            self.held.clear()

    def _publish_full_blocks(self, req: Request) -> None:
        if self.prefix is None:
            return
        bs, start = self.cfg.block_size, len(req.block_hashes)
        parent = req.block_hashes[-1] if req.block_hashes else ROOT
        for i, h in enumerate(chain_hashes(req.all_ids[start * bs:req.num_computed // bs * bs], bs, parent), start):
            req.block_hashes.append(h)
            b = req.table.blocks[i]
            if self.prefix.register(b, h):
                self._block_event("cached", b, req.request_id, i, self.allocator.refcount[b])

    # ---- events and stats ---------------------------------------------------------------------------
    def _t(self, t: float) -> float:
        return t - self.t0

    def _text(self, token: int) -> str:
        return self.tokenizer.token_text(token) if self.tokenizer is not None else str(token)

    def emit(self, ev: TraceEvent) -> None:
        if self.trace:
            self._events.append(ev)

    def drain(self) -> list[TraceEvent]:
        """The events emitted since the last drain, in order."""
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
        # Per request, not per block (it runs every step: 64 sequences over 4K contexts hold 16K blocks): blocks
        # before the one holding position num_computed are full, that one is partial, those after it are empty.
        bs = self.cfg.block_size
        full: set[int] = set()
        partial: dict[int, int] = {}
        for req in self.running + self.held:
            k, rem = divmod(req.num_computed, bs)
            full.update(req.table.blocks[:k])
            if rem and k < len(req.table.blocks):
                b = req.table.blocks[k]
                partial[b] = max(partial.get(b, 0), rem)
        filled = len(full) * bs + sum(n for b, n in partial.items() if b not in full)
        return self.allocator.num_used * bs, filled

    def _record_step(self, entries: list[dict], n_tokens: int, t_start: float, now: float) -> None:
        allocated, filled = self.kv_slots()
        reserved_req = sum(len(r.prompt_ids) + r.params.max_new_tokens for r in self.running + self.held)
        live = len(self.running) + len(self.held)
        stats = {"n_tokens": n_tokens, "n_seqs": len(entries), "duration_s": now - t_start,
                 "blocks_used": self.allocator.num_used, "slots_allocated": allocated, "slots_filled": filled,
                 "reserved_request_max": reserved_req, "reserved_model_max": live * self.model_config.max_seq_len,
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
        text=sched.tokenizer.decode(req.output_ids, skip_special=True) if sched.tokenizer is not None else "",
        finish_reason=req.finish_reason, n_prompt_tokens=len(req.prompt_ids), n_cached_tokens=req.num_cached_tokens,
        n_generated=len(req.output_ids), num_preemptions=req.num_preemptions, arrival_s=sched._t(req.arrival_time),
        first_token_s=sched._t(req.token_times[0]) if req.token_times else None,
        finished_s=sched._t(req.finished_time), ttft_s=m["ttft_s"], tpot_s=m["tpot_s"], e2e_s=m["e2e_s"],
        queue_s=m["queue_s"], itl_s=m["itl_s"])
