"""ModelRunner: one model's weights, its KV layout and every fast path; the only code that runs its forward."""
from __future__ import annotations

import threading
from collections import Counter
from contextlib import nullcontext

import torch

from ..kernels import fused_cpu, onednn_linears
from ..kernels.fused_cpu import MAX_FUSED_POSITIONS, MAX_FUSED_QUANTIZED_POSITIONS, FusedStep
from ..kernels.paged_graphs import BUCKETS, StepGraphs, graphable
from ..model.config import engine_settings
from ..model.sampling import choice, sample
from ..model.transformer import Transformer
from ..quant.linears import QuantizedLinear, quantized_linears
from .paged import PagedBackend, PagedKVPool, PagedSequence, StepRows
from .request import ScheduledBatch

MIN_POOL_BLOCKS = 16  # the smallest size class of lent pools (256 positions at block size 16)
MAX_SPARE_POOLS = 2  # per size class (concurrent runs, and model drafts, each hold one while they run)
SPARE_POOL_BYTES = 1 << 29  # pools kept between runs on the CPU: at most 512 MiB of a worker's RAM (a GPU: 1/8)


def pool_size_class(num_blocks: int) -> int:
    """Blocks a lent pool has for a request of `num_blocks`: the next power of two, at least MIN_POOL_BLOCKS."""
    return max(MIN_POOL_BLOCKS, 1 << (max(num_blocks, 1) - 1).bit_length())


class ModelRunner:
    def __init__(self, model: Transformer) -> None:
        self.model = model
        self.device = model.tok_embeddings.weight.device
        self.fused: FusedStep | None = None
        self.fallback_reason = ""  # why a CPU model has no fused step
        if self.device.type == "cpu":
            self.fused, self.fallback_reason = fused_cpu.build(model)
        self.quantized = any(isinstance(m, QuantizedLinear) for m in model.modules())
        # whether the model allows CUDA graphs (device, quantized kernels); INFERENCE_CUDA_GRAPHS is read per step
        self._graphable = graphable(model, self.device)
        # A long CPU step's reference linears run on oneDNN (onednn_linears.py): fp32, or AMX bf16 where asked for
        self._onednn = self.device.type == "cpu" and onednn_linears.available()
        self._bf16_weights: dict = {}  # the AMX bf16 path's weight copies, made at its first step
        self._spare_pools: dict[tuple[int, int, int, str], list[PagedKVPool]] = {}  # size class → pools to lend
        self._spare_bytes = (torch.cuda.get_device_properties(self.device).total_memory // 8
                             if self.device.type == "cuda" else SPARE_POOL_BYTES)
        self._lock = threading.Lock()
        self.path_counts: Counter[str] = Counter()  # forwards per path taken, for "which kernel ran" reports

    def __deepcopy__(self, memo: dict) -> None:
        # A copied model (quantize_model's copy) gets a runner of its own at first use: this one's fused weight
        # views, pools and graphs belong to the original's tensors.
        return None

    @property
    def kernel(self) -> str:
        """The path a decode step takes, for run headers and reports."""
        return self.fused.kernel if self.fused is not None else "torch reference"

    @property
    def use_step_graphs(self) -> bool:
        return self._graphable and engine_settings().cuda_graphs

    def new_kv_pool(self, num_blocks: int, block_size: int, n_layers: int | None = None,
                    kv_dtype: str = "auto") -> PagedKVPool:
        """The paged K/V storage of this model's steps (`n_layers` < depth: an early-exit draft's)."""
        cfg, weight = self.model.config, self.model.tok_embeddings.weight
        return PagedKVPool(n_layers or cfg.n_layers, num_blocks, cfg.n_kv_heads, block_size, cfg.head_dim,
                           weight.dtype, weight.device, kv_dtype)

    def lend_pool(self, num_blocks: int, block_size: int, n_layers: int | None = None,
                  kv_dtype: str = "auto") -> PagedKVPool:
        """A pool of at least `num_blocks` blocks (a power of two: similar runs share spares and their CUDA graphs),
        lent until `give_back`; every bucket's graph is captured here, before anyone holds a block, never in a step."""
        depth = n_layers or self.model.config.n_layers
        key = (pool_size_class(num_blocks), block_size, depth, kv_dtype)
        with self._lock:
            spare = self._spare_pools.get(key)
            pool = spare.pop() if spare else None
        if pool is None:
            pool = self.new_kv_pool(*key)
        # a new pool, or a spare last lent while graphs were off (INFERENCE_CUDA_GRAPHS=0), gets every bucket now
        if self.use_step_graphs and len(self.step_graphs(pool).buckets) < len(BUCKETS):
            pool.step_graphs.prepare_all()
        return pool

    def give_back(self, pool: PagedKVPool) -> None:
        """Keep a lent pool for its size class (≤ MAX_SPARE_POOLS each, `_spare_bytes` in all)."""
        key = (pool.num_blocks, pool.block_size, pool.k.shape[0], pool.kv_dtype)
        with self._lock:
            spare = self._spare_pools.setdefault(key, [])
            kept = sum(p.nbytes() for pools in self._spare_pools.values() for p in pools)
            if len(spare) < MAX_SPARE_POOLS and kept + pool.nbytes() <= self._spare_bytes:
                spare.append(pool)

    def new_sequence(self, capacity: int, block_size: int = 16, n_layers: int | None = None) -> PagedSequence:
        """A sequence of ≥ `capacity` positions on a lent pool of its own (a model draft's); `close()` gives it back."""
        pool = self.lend_pool(-(-capacity // block_size), block_size, n_layers)
        return PagedSequence(pool, on_close=self.give_back)

    @torch.inference_mode()
    def run(self, batch: ScheduledBatch, pool: PagedKVPool) -> list:
        """One forward, then a token per plain request; a speculative request gets its rows' logits."""
        logits = self.forward_batch(batch, pool)
        reqs = batch.requests
        if all(r.spec is None and r.chooser is None and r.params.plain_argmax for r in reqs):
            return logits.argmax(-1).tolist()
        out, row = [], 0
        for r, n in zip(reqs, batch.n_rows or [1] * len(reqs)):
            rows, row = logits[row:row + n], row + n
            out.append(rows if r.spec is not None else (r.chooser or sample)(rows[0], r.params, r.generator, r.all_ids))
            r.choice = choice(rows[0], r.params, out[-1], r.all_ids) if r.spec is None and r.params.trace_top else None
        return out

    def step_graphs(self, pool: PagedKVPool) -> StepGraphs:
        """The bucketed step graphs over `pool`, kept on it (built at first use)."""
        if pool.step_graphs is None:
            # captured on a GPU; elsewhere (a test forcing the path on the CPU) the same buffers run eagerly
            pool.step_graphs = StepGraphs(self.model, pool, capture=pool.k.is_cuda, compile=engine_settings().compile)
        return pool.step_graphs

    @torch.inference_mode()
    def forward_sequence(self, tokens: list[int], seq: PagedSequence, all_rows: bool = False,
                         n_layers: int | None = None) -> torch.Tensor:
        """Logits of `tokens` at seq.length… (all rows or the last); the sequence advances by len(tokens)."""
        n = len(tokens)
        start = seq.length
        step = StepRows(list(tokens), list(range(start, start + n)), [0] * n,
                        list(range(n)) if all_rows else [n - 1], [seq.reserve(n)])
        logits = self.forward_batch(step, seq.pool, n_layers)
        seq.length += n
        return logits

    def forward_batch(self, step: StepRows, pool: PagedKVPool, n_layers: int | None = None) -> torch.Tensor:
        """Logits [len(step.rows), vocab]; K/V of every new token written to `pool` (`n_layers`: early exit)."""
        n = len(step.tokens)
        kv_int8 = " (int8 KV)" if pool.quantized else ""  # path names say when the pages are int8
        mode = (onednn_linears.long_step_mode(self._bf16_weights)
                if self._onednn and n >= onednn_linears.MIN_ROWS else None)
        # A long step in AMX bf16, or a long quantized one, leaves the fused step's per-row kernels: the reference
        # (each quantized weight dequantized once) multiplies all rows on oneDNN (bench/prefill.py's figures).
        if (self.fused is not None and (n <= MAX_FUSED_POSITIONS or self.quantized)
                and not (mode and (mode.bf16 or (self.quantized and n > MAX_FUSED_QUANTIZED_POSITIONS)))):
            # The fused step reads and writes fp32 pages and an int8 pool's pages with their scales alike.
            tokens, positions, seq = (torch.tensor(x) for x in (step.tokens, step.positions, step.seq))
            tables, rows = torch.tensor(step.tables), torch.tensor(step.rows)
            scales = (pool.k_scale, pool.v_scale)  # None, None for fp32 pages
            self.path_counts[self.fused.kernel + kv_int8] += 1
            if n <= MAX_FUSED_POSITIONS:
                return self.fused.forward_rows(tokens, positions, seq, tables, pool.k, pool.v, rows, n_layers, *scales)
            # Consecutive chunks of the flattened row: a chunk's tokens see the K/V earlier chunks wrote.
            out = []
            for a in range(0, n, MAX_FUSED_POSITIONS):
                b = min(n, a + MAX_FUSED_POSITIONS)
                local = rows[(rows >= a) & (rows < b)] - a  # may be empty: the chunk only writes K/V
                out.append(self.fused.forward_rows(tokens[a:b], positions[a:b], seq[a:b], tables, pool.k, pool.v,
                                                   local, n_layers, *scales))
            return torch.cat(out)
        if self.use_step_graphs and (n_layers or self.model.config.n_layers) == pool.k.shape[0]:
            graphs = self.step_graphs(pool)  # an early-exit draft's steps too, over its shallower pool
            if graphs.applies(step):
                self.path_counts[graphs.kernel] += 1
                return graphs.run(step)
        self.path_counts[(mode.kernel if mode else "torch reference") + kv_int8] += 1
        backend = PagedBackend(pool)
        backend.begin_step(step.slices)
        with mode or nullcontext():
            x = self.model.hidden_states(torch.tensor([step.tokens], device=self.device),
                                         torch.tensor(step.positions, device=self.device), backend, n_layers)
        return self.model.compute_logits(x[0, torch.tensor(step.rows, dtype=torch.long, device=self.device)])


def runner_for(model: Transformer) -> ModelRunner:
    """One runner per model, kept on the model so both (with pools and graphs) go when the model does."""
    runner = model.__dict__.get("_runner")
    if runner is None:
        runner = model.__dict__["_runner"] = ModelRunner(model)
    return runner


def kernels_used(model: Transformer) -> list[str]:
    """What a decode step of `model` runs: the fused CPU step where it applies, else each layer's kernel."""
    runner = runner_for(model)
    if runner.fused is not None:
        return [runner.kernel]
    return sorted({m.kernel for m in quantized_linears(model).values()}) or ["fp32-mkl-sgemm"]
