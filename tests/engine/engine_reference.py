"""The references the engine tests compare against: transformers' model, a contiguous KV cache, the block
allocator's invariant, and a tiny model config."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from inference_core.model.config import ModelConfig
from inference_core.model.kv_cache import sdpa


def tiny_config(**overrides) -> ModelConfig:
    """A random-weight config small enough for unit tests (runs in milliseconds)."""
    base = dict(vocab_size=97, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, max_seq_len=256,
                rope_theta=10_000.0)
    base.update(overrides)
    return ModelConfig(**base)


def check(alloc) -> None:
    """A `BlockAllocator`'s invariant: a block is free iff its refcount is 0, and no count is negative."""
    for b, rc in enumerate(alloc.refcount):
        assert rc >= 0, (b, rc)
        assert (rc == 0) == alloc.is_free(b), (b, rc)
    assert alloc.num_free == sum(1 for rc in alloc.refcount if rc == 0)


def hf_reference(device: str = "cpu"):
    """transformers' own GGUF loader (its dequantization and Q/K un-permutation), fp32, eval mode."""
    from transformers import AutoModelForCausalLM

    from inference_core.model.weights import MODELS, gguf_path

    path = gguf_path(MODELS["smollm2-135m"])
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model.to(device).eval()


@dataclass
class KVCache:
    """Contiguous cache. Invariant: positions [0, length) hold valid K/V in every layer."""

    k: torch.Tensor  # [layers, batch, kv_heads, capacity, head_dim]
    v: torch.Tensor
    length: int = 0

    @classmethod
    def allocate(cls, n_layers: int, batch: int, n_kv_heads: int, capacity: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str) -> "KVCache":
        shape = (n_layers, batch, n_kv_heads, capacity, head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def attend(self, layer, q, k, v):
        start, t_new = self.length, k.shape[2]
        end = start + t_new
        if end > self.capacity:
            raise ValueError(f"KV cache full: {end} tokens > capacity {self.capacity}")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return sdpa(q, self.k[layer, :, :, :end], self.v[layer, :, :, :end])

    def advance(self, n_tokens: int) -> None:
        self.length += n_tokens

    def truncate(self, length: int) -> None:
        """Forget positions ≥ length (speculative decoding's rollback); stale values are overwritten later."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        self.length = length
