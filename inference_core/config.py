"""Model hyper-parameters: the only numbers the forward pass and the cache sizes depend on."""
from __future__ import annotations

from dataclasses import asdict, dataclass

DEFAULT_MODEL = "smollm2-135m"  # the course's model: every default model name in the code is this constant


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-family decoder. Invariant: dim == n_heads * head_dim and n_heads % n_kv_heads == 0.

    `qkv_bias` adds a bias to the fused Q/K/V projection (Qwen2); off, the model is plain Llama (SmolLM2).
    """

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5
    max_seq_len: int = 2048
    tie_embeddings: bool = True
    bos_token_id: int = 1
    eos_token_id: int = 2
    qkv_bias: bool = False

    def __post_init__(self) -> None:
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(f"inconsistent heads: dim={self.dim} n_heads={self.n_heads} kv={self.n_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def kv_bytes_per_token(self, bytes_per_value: int = 4) -> int:
        """K and V, every layer, every KV head: 2 × layers × kv_heads × head_dim × bytes."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bytes_per_value

    def n_params(self) -> int:
        hd = self.head_dim
        attn = self.dim * (self.n_heads + 2 * self.n_kv_heads) * hd + self.n_heads * hd * self.dim
        mlp = 3 * self.dim * self.ffn_dim
        bias = (self.n_heads + 2 * self.n_kv_heads) * hd if self.qkv_bias else 0
        per_layer = attn + bias + mlp + 2 * self.dim
        head = 0 if self.tie_embeddings else self.vocab_size * self.dim
        return self.n_layers * per_layer + self.vocab_size * self.dim + self.dim + head

    def matmul_params(self) -> int:
        """Parameters touched by a matrix multiply per token (the output head included, embeddings not)."""
        hd = self.head_dim
        attn = self.dim * (self.n_heads + 2 * self.n_kv_heads) * hd + self.n_heads * hd * self.dim
        return self.n_layers * (attn + 3 * self.dim * self.ffn_dim) + self.vocab_size * self.dim

    def to_dict(self) -> dict:
        return asdict(self)


def tiny_config(**overrides) -> ModelConfig:
    """A random-weight config small enough for unit tests (runs in milliseconds)."""
    base = dict(vocab_size=97, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, max_seq_len=256,
                rope_theta=10_000.0)
    base.update(overrides)
    return ModelConfig(**base)
