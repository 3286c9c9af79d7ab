"""What one forward step costs, estimated from the model's shape: FLOPs and bytes moved (for the roofline)."""
from __future__ import annotations

from ..model.config import ModelConfig


def step_cost(cfg: ModelConfig, n_new: int, n_context: int, n_logits: int, bytes_per_value: int,
              kv_cached: bool) -> tuple[float, float]:
    """(FLOPs, bytes moved) estimate for one forward of `n_new` tokens over `n_context` total positions."""
    body = cfg.matmul_params() - cfg.vocab_size * cfg.dim
    flops = 2.0 * body * n_new + 2.0 * cfg.vocab_size * cfg.dim * n_logits
    pairs = n_new * n_context - (n_new * (n_new - 1)) / 2  # causal: query i sees context − n_new + i + 1 keys
    flops += cfg.n_layers * 4.0 * cfg.n_heads * cfg.head_dim * pairs
    weight_bytes = cfg.matmul_params() * bytes_per_value
    kv_read = cfg.kv_bytes_per_token(bytes_per_value) * (n_context if kv_cached else 0)
    return flops, float(weight_bytes + kv_read)
