"""Speed-only models: real model shapes with random weights, to measure speed at a scale SmolLM2 cannot show."""
from __future__ import annotations

from dataclasses import replace

from .config import ModelConfig

SPEED_ONLY_LABEL = "speed only: random weights"

SPEED_ONLY_MODELS: dict[str, ModelConfig] = {
    # Llama 3.2 1B: 16 layers, d 2048, GQA 32/8, SwiGLU 8192, 128,256-token vocabulary, tied head.
    "speed-llama-3.2-1b": ModelConfig(vocab_size=128_256, dim=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                                      ffn_dim=8192, max_seq_len=8192, rope_theta=500_000.0, tie_embeddings=True,
                                      bos_token_id=128_000, eos_token_id=128_001),
    # Llama 3 8B: 32 layers, d 4096, GQA 32/8, SwiGLU 14336, separate head (16 GB in bf16, 32 GB in fp32).
    "speed-llama-3-8b": ModelConfig(vocab_size=128_256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                                    ffn_dim=14_336, max_seq_len=8192, rope_theta=500_000.0, tie_embeddings=False,
                                    bos_token_id=128_000, eos_token_id=128_001),
}


class IdsTokenizer:
    """No vocabulary: text → its UTF-8 bytes offset past the special ids; ids → `<id>` labels."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.bos_token_id, self.eos_token_id = cfg.bos_token_id, cfg.eos_token_id
        self.offset = 3

    def encode(self, text: str) -> list[int]:
        return [b + self.offset for b in text.encode("utf-8")]

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return "".join(self.token_text(i) for i in ids)

    def token_text(self, token_id: int) -> str:
        return f"<{token_id}>"

    def chat_prompt(self, user: str, system: str | None = None) -> str:
        return user  # no chat template: the weights are random anyway


def is_speed_only(name: str) -> bool:
    return name in SPEED_ONLY_MODELS


def speed_only_parts(name: str, n_layers: int | None = None) -> tuple[ModelConfig, IdsTokenizer]:
    """`name`'s shape (`n_layers` trims it) and its ids-only tokenizer; weights are a seeded draw."""
    cfg = SPEED_ONLY_MODELS[name]
    if n_layers is not None:
        cfg = replace(cfg, n_layers=n_layers)
    return cfg, IdsTokenizer(cfg)
