"""Batch-1 decode as one captured CUDA graph: a step replays ~500 kernels with one launch.

At 135M parameters a decode step on a GPU is launch-bound, not bandwidth-bound: 30 layers × ~15 kernels,
each a few microseconds of CPU-side launch, cost far more than reading 0.5 GB of weights at 3 TB/s.
A CUDA graph records the step's kernels once and replays them; for that every replay must see the same
shapes and addresses, so the cache below is addressed by a position *tensor* and attention runs over the
whole fixed capacity with a mask (gpt-fast's static cache, without torch.compile).
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from .kv_cache import sdpa

CAPACITY_STEP = 256  # graphs are kept per capacity rounded up to this, so most requests reuse one


class StaticKVCache:
    """Fixed-capacity cache for one sequence. Invariant: slots [0, length) hold valid K/V; during a decode
    step the new token's K/V go to slot `pos` (a device tensor) and attention masks every slot > pos."""

    def __init__(self, n_layers: int, n_kv_heads: int, capacity: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        shape = (n_layers, 1, n_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.slots = torch.arange(capacity, device=device)
        self.length = 0  # host-side count, for reporting; the graph never reads it
        self.mask: torch.Tensor | None = None

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def attend(self, layer, q, k, v):
        t_new = k.shape[2]
        if t_new > 1:  # prefill (eager, never captured): contiguous slots from 0
            self.k[layer, :, :, :t_new] = k
            self.v[layer, :, :, :t_new] = v
            return sdpa(q, self.k[layer, :, :, :t_new], self.v[layer, :, :, :t_new])
        self.k[layer].index_copy_(2, self.pos, k)
        self.v[layer].index_copy_(2, self.pos, v)
        if layer == 0:  # one mask per step, shared by every layer (one kernel, not thirty)
            self.mask = (self.slots <= self.pos).view(1, 1, 1, -1)
        return F.scaled_dot_product_attention(q, self.k[layer], self.v[layer], attn_mask=self.mask, enable_gqa=True)

    def advance(self, n_tokens: int) -> None:
        pass  # not called on replay: the decoder keeps `length`

    def bytes_per_layer(self) -> int:
        _, batch, heads, _, dim = self.k.shape
        return 2 * batch * heads * self.length * dim * self.k.element_size()

    def bytes_used(self) -> int:
        return self.k.shape[0] * self.bytes_per_layer()


class GraphDecoder:
    """Prefill eagerly, then decode with a CUDA graph captured on the first decode step.

    Reusable across requests of up to `capacity` tokens: `prefill` starts a new sequence. Not thread-safe
    (the engine's lock serialises callers). Capturing runs the step eagerly a few times first (CUDA's
    requirement for lazily initialised kernels); those warm-up runs write the same K/V to the same slot the
    replay then writes, so they change nothing.
    """

    def __init__(self, model, capacity: int, compile: bool = False) -> None:
        cfg = model.config
        self.model = model
        # Optional (INFERENCE_COMPILE=1): Inductor fuses each layer's elementwise ops (RoPE, SiLU·up, residual
        # adds, norms) so the captured graph holds fewer, larger kernels. Compiling costs tens of seconds once.
        self.step_fn = torch.compile(self._step, dynamic=False) if compile else self._step
        p = next(model.parameters())
        self.cache = StaticKVCache(cfg.n_layers, cfg.n_kv_heads, capacity, cfg.head_dim, p.dtype, p.device)
        self.token = torch.zeros((1, 1), dtype=torch.long, device=p.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    @property
    def capacity(self) -> int:
        return self.cache.capacity

    def prefill(self, ids: list[int]) -> torch.Tensor:
        """Logits [vocab] of the last prompt position; the cache then holds the prompt."""
        if len(ids) >= self.capacity:
            raise ValueError(f"prompt of {len(ids)} tokens does not fit a graph of capacity {self.capacity}")
        device = self.token.device
        logits = self.model(torch.tensor([ids], device=device), torch.arange(len(ids), device=device),
                            self.cache, last_only=True)
        self.cache.length = len(ids)
        return logits[0, -1]

    def decode(self, token: int) -> torch.Tensor:
        """Feed `token` at position `length`; logits [vocab] for the next one (a view, valid until the next call)."""
        if self.cache.length >= self.capacity:
            raise ValueError(f"graph capacity {self.capacity} reached")
        self.token.fill_(token)
        self.cache.pos.fill_(self.cache.length)
        if self.graph is None:
            self._capture()
        self.graph.replay()
        self.cache.length += 1
        return self.logits[0, -1]

    def _step(self) -> torch.Tensor:
        return self.model(self.token, self.cache.pos, self.cache, last_only=True)

    def _capture(self) -> None:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.step_fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self.step_fn()
        self.graph = graph


def graphs_enabled(model, device: torch.device) -> bool:
    """CUDA device, fp model (quantized linears may synchronise, e.g. LLM.int8's outlier count), not disabled
    by INFERENCE_CUDA_GRAPHS=0."""
    if device.type != "cuda" or os.environ.get("INFERENCE_CUDA_GRAPHS", "1") == "0":
        return False
    from .quant import quantized_linears

    return not quantized_linears(model)


def compile_enabled() -> bool:
    return os.environ.get("INFERENCE_COMPILE", "0") == "1"


def capacity_bucket(n_tokens: int, max_seq_len: int) -> int:
    return min(max_seq_len, -(-n_tokens // CAPACITY_STEP) * CAPACITY_STEP)
