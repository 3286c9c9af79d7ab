"""Batch-1 decode as one captured CUDA graph: a step replays ~500 kernels with one launch.

At 135M parameters a decode step on a GPU is launch-bound, not bandwidth-bound: 30 layers × ~15 kernels,
each a few microseconds of CPU-side launch, cost far more than reading 0.5 GB of weights at 3 TB/s.
A CUDA graph records the step's kernels once and replays them; for that every replay must see the same
shapes and addresses, so the cache below is addressed by a position *tensor* and attention runs over the
whole fixed capacity with a mask (gpt-fast's static cache, without torch.compile).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..model.config import engine_settings
from ..model.kv_cache import KVCache
from ..quant.linears import quantized_linears
from .graph_capture import capture

CAPACITY_STEP = 256  # graphs are kept per capacity rounded up to this, so most requests reuse one

@dataclass
class StaticKVCache(KVCache):
    """A `KVCache` for one sequence that a captured decode step can address. Invariant: slots [0, length)
    hold valid K/V; during a decode step the new token's K/V go to slot `pos` (a device tensor) and attention
    masks every slot > pos. Prefill is the contiguous cache's own path (from slot 0, never captured)."""

    pos: torch.Tensor = field(init=False)
    slots: torch.Tensor = field(init=False)
    mask: torch.Tensor | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.pos = torch.zeros(1, dtype=torch.long, device=self.k.device)
        self.slots = torch.arange(self.capacity, device=self.k.device)

    def attend(self, layer, q, k, v):
        if k.shape[2] > 1:
            return super().attend(layer, q, k, v)
        self.k[layer].index_copy_(2, self.pos, k)
        self.v[layer].index_copy_(2, self.pos, v)
        if layer == 0:  # one mask per step, shared by every layer (one kernel, not thirty)
            self.mask = (self.slots <= self.pos).view(1, 1, 1, -1)
        return F.scaled_dot_product_attention(q, self.k[layer], self.v[layer], attn_mask=self.mask, enable_gqa=True)

    def advance(self, n_tokens: int) -> None:
        pass  # a replayed step runs no Python: the decoder keeps `length`


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
        self.cache = StaticKVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, capacity, cfg.head_dim, p.dtype, p.device)
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
        self.cache.length = 0  # a new sequence: prefill writes from slot 0…
        self.cache.pos.fill_(0)  # …and a one-token prompt takes the decode path, at slot 0
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
        self.graph, self.logits = capture(self.step_fn)


def graphable(model, device: torch.device) -> bool:
    """A CUDA device, and every quantized linear (if any) runs a fused Triton kernel: the others may synchronise
    (LLM.int8 counts its outliers on the host) or dequantize per call."""
    fused = all(layer.kernel.startswith("triton-") for layer in quantized_linears(model).values())
    return device.type == "cuda" and fused


def graphs_enabled(model, device: torch.device) -> bool:
    """Graphs are used now: `graphable`, and not turned off by INFERENCE_CUDA_GRAPHS=0 (read at every call)."""
    return engine_settings().cuda_graphs and graphable(model, device)


def compile_enabled() -> bool:
    return engine_settings().compile


def capacity_bucket(n_tokens: int, max_seq_len: int) -> int:
    return min(max_seq_len, -(-n_tokens // CAPACITY_STEP) * CAPACITY_STEP)
