"""Prefix caching over the paged pool: full blocks keyed by a chained hash of their tokens."""
from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence

from .paged import BlockAllocator

ROOT = b""


def chain_hashes(tokens: Sequence[int], block_size: int, parent: bytes = ROOT) -> list[bytes]:
    """Keys of every *full* block of `tokens` (a trailing partial block has none): sha256 of the parent's key and
    the block's ids, so distinct prefixes never collide in practice."""
    out = []
    for i in range(len(tokens) // block_size):
        parent = hashlib.sha256(parent + array("q", tokens[i * block_size:(i + 1) * block_size]).tobytes()).digest()
        out.append(parent)
    return out


class PrefixCache:
    """hash ↔ block maps over a `BlockAllocator`. Invariant: a mapped block holds exactly its key's prefix."""

    def __init__(self, allocator: BlockAllocator, block_size: int,
                 on_evict: Callable[[int], None] | None = None) -> None:
        self.allocator = allocator
        self.block_size = block_size
        self.by_hash: dict[bytes, int] = {}
        self.hash_of: dict[int, bytes] = {}
        self.on_evict = on_evict
        allocator.on_reuse = self._forget
        self.query_tokens = 0  # prompt tokens looked up (vLLM: prefix_cache_queries)
        self.hit_tokens = 0  # of which served from the cache (vLLM: prefix_cache_hits)

    def match(self, hashes: Sequence[bytes]) -> list[int]:
        """Physical blocks of the longest cached run of `hashes` from the start (no refcounts taken)."""
        blocks = []
        for h in hashes:
            b = self.by_hash.get(h)
            if b is None:
                break
            blocks.append(b)
        return blocks

    def record_query(self, n_tokens: int, n_hit: int) -> None:
        self.query_tokens += n_tokens
        self.hit_tokens += n_hit

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def register(self, block: int, h: bytes) -> bool:
        """Publish a newly filled block. False when that prefix is already cached in another block."""
        if h in self.by_hash or block in self.hash_of:
            return False
        self.by_hash[h] = block
        self.hash_of[block] = h
        return True

    @property
    def num_cached(self) -> int:
        return len(self.by_hash)

    def _forget(self, block: int) -> None:
        h = self.hash_of.pop(block, None)
        if h is not None:
            del self.by_hash[h]
            if self.on_evict is not None:
                self.on_evict(block)
