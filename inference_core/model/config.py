"""Model hyper-parameters: the only numbers the forward pass and the cache sizes depend on."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "smollm2-135m"  # the course's model: every default model name in the code is this constant


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-family decoder. Invariant: dim == n_heads * head_dim and n_heads % n_kv_heads == 0."""
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
        """`matmul_params`, plus the Q/K/V biases, the norms and the embeddings (once more when the head is untied)."""
        bias = (self.n_heads + 2 * self.n_kv_heads) * self.head_dim if self.qkv_bias else 0
        embeddings = 0 if self.tie_embeddings else self.vocab_size * self.dim
        return self.matmul_params() + self.n_layers * (bias + 2 * self.dim) + self.dim + embeddings

    def matmul_params(self) -> int:
        """Parameters touched by a matrix multiply per token (the output head included, embeddings not)."""
        hd = self.head_dim
        attn = self.dim * (self.n_heads + 2 * self.n_kv_heads) * hd + self.n_heads * hd * self.dim
        return self.n_layers * (attn + 3 * self.dim * self.ffn_dim) + self.vocab_size * self.dim


def _flag(value: str | None, default: bool) -> bool:
    if not value:
        return default
    return value.strip().lower() not in ("0", "false", "off", "no")


@dataclass(frozen=True)
class EngineSettings:
    """The engine's switches as the environment says now (`engine_settings()`: nothing cached)."""
    device: str | None = None  # INFERENCE_DEVICE (cpu, cuda, cuda:1); None: CUDA when available
    dtype: str | None = None  # INFERENCE_DTYPE: weights' and activations' dtype; None: bfloat16 on CUDA, else float32
    cpu_fastpath: bool = True  # INFERENCE_CPU_FASTPATH=0: the reference forward instead of the fused CPU step
    quant_kernels: bool = True  # INFERENCE_QUANT_KERNELS=torch: no compiled kernels (pure-PyTorch fallbacks)
    int_dot: str = "auto"  # INFERENCE_INT_DOT=vnni|avx2|float: int8/int4 CPU steps on integer dot products or not
    cuda_graphs: bool = True  # INFERENCE_CUDA_GRAPHS=0: decode eagerly on CUDA
    compile: bool = False  # INFERENCE_COMPILE=1: torch.compile the step before capturing its graph
    cache_dir: Path = Path.home() / ".cache" / "inference-lab"  # INFERENCE_LAB_CACHE: weights, kernels

    def dtype_for(self, device_type: str) -> str:
        """bf16 on a GPU (half the bytes per step; tensor cores), fp32 on the CPU (no fast bf16 matmul on AVX2)."""
        return self.dtype or ("bfloat16" if device_type == "cuda" else "float32")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> EngineSettings:
        return cls(
            device=env.get("INFERENCE_DEVICE") or None,
            dtype=env.get("INFERENCE_DTYPE") or None,
            cpu_fastpath=_flag(env.get("INFERENCE_CPU_FASTPATH"), True),
            quant_kernels=env.get("INFERENCE_QUANT_KERNELS", "").lower() != "torch",
            int_dot=(env.get("INFERENCE_INT_DOT") or "auto").strip().lower(),
            cuda_graphs=_flag(env.get("INFERENCE_CUDA_GRAPHS"), True),
            compile=_flag(env.get("INFERENCE_COMPILE"), False),
            cache_dir=Path(env.get("INFERENCE_LAB_CACHE") or cls.cache_dir),
        )


def engine_settings() -> EngineSettings:
    """The process's settings, read from its environment."""
    return EngineSettings.from_env()
