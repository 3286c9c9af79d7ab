"""Short steps over the paged KV pool as CUDA graphs, one per token-count bucket (1, 2, 4, …, 64).
Invariant: a padded row repeats the step's last real row (same K/V, same slot); its logits are dropped."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..engine.paged import PagedKVPool, SeqSlice, StepRows, paged_attention
from ..model.config import engine_settings
from . import triton_kernels

BUCKETS = (1, 2, 4, 8, 16, 32, 64)  # 64: a batch of 64 decodes (issue 13's second batching goal)
# One capture at a time in the process: the worker's threads (the batching service, single runs, speculative runs)
# may each lend a new pool and capture over it, and a capture records whatever its stream launches.
_capture_lock = threading.Lock()


def graphable(model, device: torch.device) -> bool:
    """A CUDA device, and every layer a graph may record: each quantized linear says whether it is `capturable`."""
    return device.type == "cuda" and all(getattr(m, "capturable", True) for m in model.modules())


def graphs_enabled(model, device: torch.device) -> bool:
    """Graphs are used now: `graphable`, and not turned off by INFERENCE_CUDA_GRAPHS=0 (read at every call)."""
    return engine_settings().cuda_graphs and graphable(model, device)


def bucket_for(n: int) -> int:
    return next(b for b in BUCKETS if b >= n)


def capture(step: Callable[[], torch.Tensor]) -> tuple["torch.cuda.CUDAGraph", torch.Tensor]:
    """`step` recorded as a CUDA graph (not run), with the output tensors its replays overwrite."""
    with _capture_lock:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = step()
    return graph, out


@dataclass
class _Bucket:
    """Static inputs and output of one bucket's step (the addresses a captured graph reads and writes)."""
    tokens: torch.Tensor  # [1, B] long
    positions: torch.Tensor  # [B] long
    slot_block: torch.Tensor  # [B] long
    slot_offset: torch.Tensor  # [B] long
    tables: torch.Tensor  # [B, W] int32 (the Triton kernel's dtype; torch indexes with int32 too)
    lens: torch.Tensor  # [B] int32
    logits: torch.Tensor | None = None
    graph: "torch.cuda.CUDAGraph | None" = None

    @classmethod
    def allocate(cls, size: int, width: int, device: torch.device) -> "_Bucket":
        def z(*shape, dtype=torch.long):
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(z(1, size), z(size), z(size), z(size), z(size, width, dtype=torch.int32), z(size, dtype=torch.int32))


class _BucketBackend:
    """AttentionBackend of one bucket: each row's K/V into its slot, then its query over positions [0, p]."""

    def __init__(self, pool: PagedKVPool, bucket: _Bucket, use_triton: bool) -> None:
        self.pool, self.bucket, self.use_triton = pool, bucket, use_triton

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q: [1, Hq, B, D]; k, v: [1, Hkv, B, D]
        b, pool = self.bucket, self.pool
        pool.write(layer, b.slot_block, b.slot_offset, k[0].transpose(0, 1), v[0].transpose(0, 1))
        kc, vc = pool.k[layer], pool.v[layer]
        ks, vs = (pool.k_scale[layer], pool.v_scale[layer]) if pool.quantized else (None, None)
        qd = q[0].transpose(0, 1)  # [B, Hq, D]
        if self.use_triton:
            from .triton_kernels.paged_decode import paged_decode

            out = paged_decode(qd, kc, vc, b.tables, b.lens, k_scale=ks, v_scale=vs)
        else:
            out = paged_attention(qd.unsqueeze(2), kc, vc, b.tables, b.lens.unsqueeze(1), ks, vs).squeeze(2)
        return out.transpose(0, 1).unsqueeze(0)

    def advance(self, n_tokens: int) -> None:
        pass  # a replayed step runs no Python; the scheduler keeps every length


class StepGraphs:
    """Steps of at most 64 new tokens over one pool, one graph (or eager buffer set) per token-count bucket."""

    def __init__(self, model, pool: PagedKVPool, capture: bool, use_triton: bool | None = None,
                 compile: bool = False) -> None:
        self.model, self.capture = model, capture
        # the unbound function: a bound method kept on self would be a cycle, holding the graphs past their pool
        self._compiled = torch.compile(StepGraphs._forward, dynamic=False) if compile else None
        # A pool shallower than the model is an early-exit draft's: its steps run that many layers, then the head.
        self.n_layers = pool.k.shape[0] if pool.k.shape[0] < model.config.n_layers else None
        # The pool holds its graphs (`PagedKVPool.step_graphs`); a weak reference back lets both go, with the
        # graphs' GPU memory, as soon as the pool's last holder drops it.
        self._pool = weakref.ref(pool)
        self.width = min(-(-model.config.max_seq_len // pool.block_size), pool.num_blocks)  # a table never holds more
        if use_triton is None:  # compiled Triton reads CUDA memory only: a CPU pool on a GPU machine takes torch's path
            use_triton = triton_kernels.available() and (pool.k.is_cuda or triton_kernels.interpreted())
        self.use_triton = use_triton
        self.buckets: dict[int, _Bucket] = {}
        self.replays: dict[int, int] = {}  # bucket → steps run, for the dashboard's "graph hits"

    @property
    def pool(self) -> PagedKVPool:
        pool = self._pool()
        assert pool is not None, "step graphs outlived their pool"
        return pool

    @property
    def kernel(self) -> str:
        attention = triton_kernels.KERNEL_PAGED_DECODE if self.use_triton else "torch gather+sdpa"
        if self.pool.quantized:
            attention += ", int8 KV"
        return f"{'cuda graph' if self.capture else 'eager'} paged step ({attention})"

    def applies(self, step) -> bool:
        return 0 < len(step.tokens) <= BUCKETS[-1] and max(len(s.blocks) for s in step.slices) <= self.width

    @torch.inference_mode()
    def run(self, step) -> torch.Tensor:
        """Logits [len(step.rows), vocab] of a `paged.StepRows`; every new token's K/V written to the pool."""
        size = bucket_for(len(step.tokens))
        bucket = self._bucket(size)
        self._fill(bucket, step, size)
        self._execute(bucket)
        self.replays[size] = self.replays.get(size, 0) + 1
        return bucket.logits[torch.tensor(step.rows, device=bucket.logits.device)]

    @torch.inference_mode()
    def prepare_all(self) -> None:
        """Build (capture, where capturing) every bucket now, so no scheduled step waits for a capture."""
        for size in BUCKETS:
            bucket = self._bucket(size)
            if bucket.graph is None:  # a captured bucket is ready; an eager one runs once (its compile, if any)
                warm_up = StepRows([0] * size, [0] * size, [0] * size, [], [SeqSlice(0, size, 1, [0])])
                self._fill(bucket, warm_up, size)
                self._execute(bucket)

    def _bucket(self, size: int) -> _Bucket:
        bucket = self.buckets.get(size)
        if bucket is None:
            bucket = self.buckets[size] = _Bucket.allocate(size, self.width, self.pool.k.device)
        return bucket

    def _fill(self, b: _Bucket, step, size: int) -> None:
        """Copy the step into the bucket's buffers (host work per sequence; stale columns are masked)."""
        bs = self.pool.block_size
        pad = size - len(step.tokens)
        widest = max(len(s.blocks) for s in step.slices)
        seq_tables = torch.tensor([s.blocks + [s.blocks[0]] * (widest - len(s.blocks)) for s in step.slices],
                                  dtype=torch.int32)
        pos = torch.tensor(step.positions + [step.positions[-1]] * pad)
        tables = seq_tables[torch.tensor(step.seq + [step.seq[-1]] * pad)]  # [size, widest]
        # host → device copies on the current stream: ordered before the replay that reads them
        b.tokens.copy_(torch.tensor([step.tokens + [step.tokens[-1]] * pad]), non_blocking=True)
        b.positions.copy_(pos, non_blocking=True)
        b.slot_block.copy_(tables.gather(1, (pos // bs).unsqueeze(1)).squeeze(1), non_blocking=True)
        b.slot_offset.copy_(pos % bs, non_blocking=True)
        b.tables[:, :widest].copy_(tables, non_blocking=True)
        b.lens.copy_(pos + 1, non_blocking=True)

    def _step(self, b: _Bucket) -> torch.Tensor:
        return self._compiled(self, b) if self._compiled is not None else self._forward(b)

    def _forward(self, b: _Bucket) -> torch.Tensor:
        backend = _BucketBackend(self.pool, b, self.use_triton)
        x = self.model.hidden_states(b.tokens, b.positions, backend, self.n_layers)
        return self.model.compute_logits(x[0])

    def _execute(self, b: _Bucket) -> None:
        """Run the filled bucket: eagerly, else by replaying its graph (captured at first use, then replayed)."""
        if not self.capture:
            b.logits = self._step(b)
            return
        if b.graph is None:
            b.graph, b.logits = capture(lambda: self._step(b))
        b.graph.replay()  # a capture records the step without running it
