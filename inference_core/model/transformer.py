"""A Llama-family decoder in plain PyTorch: RMSNorm, RoPE (rotate-half), GQA attention, SwiGLU MLP."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .kv_cache import AttentionBackend


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_table(cfg: ModelConfig, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of shape [max_seq_len, head_dim], computed in fp32 like the reference."""
    dims = torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=device)
    inv_freq = 1.0 / (cfg.rope_theta ** (dims / cfg.head_dim))
    pos = torch.arange(cfg.max_seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, H, T, D]; cos/sin: [B or 1, 1, T, D]. Rotates (x1, x2) halves: x·cos + rotate_half(x)·sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        # Llama: bias-free; Qwen2: Q, K and V carry a bias (the output projection never does)
        self.wqkv = nn.Linear(cfg.dim, (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim, bias=cfg.qkv_bias)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, backend: AttentionBackend) -> torch.Tensor:
        b, t, _ = x.shape
        hd, n_qk = self.head_dim, self.n_heads + self.n_kv_heads
        heads = self.wqkv(x).view(b, t, n_qk + self.n_kv_heads, hd).transpose(1, 2)  # [B, Hq+2·Hkv, T, D]
        # RoPE on q and k heads together: the same elementwise ops, launched once instead of twice
        q, k = apply_rope(heads[:, :n_qk], cos, sin).split([self.n_heads, self.n_kv_heads], dim=1)
        v = heads[:, n_qk:]
        out = backend.attend(self.layer, q, k, v)
        return self.wo(out.transpose(1, 2).reshape(b, t, self.n_heads * hd))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ffn_dim = cfg.ffn_dim
        self.w_gate_up = nn.Linear(cfg.dim, 2 * cfg.ffn_dim, bias=False)
        self.w_down = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_gate_up(x).split(self.ffn_dim, dim=-1)
        return self.w_down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg, layer)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, cos, sin, backend):
        h = x + self.attention(self.attention_norm(x), cos, sin, backend)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rope_table(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, backend: AttentionBackend,
                last_only: bool = False, n_layers: int | None = None) -> torch.Tensor:
        """tokens, positions: [B, T] (positions may also be [T], shared by the batch)."""
        x = self.hidden_states(tokens, positions, backend, n_layers)
        return self.compute_logits(x[:, -1:] if last_only else x)

    def hidden_states(self, tokens: torch.Tensor, positions: torch.Tensor, backend: AttentionBackend,
                      n_layers: int | None = None) -> torch.Tensor:
        """The blocks without the head: [B, T, dim]. The backend has stored (and advanced past) the tokens' K/V."""
        if positions.dim() == 1:
            positions = positions.unsqueeze(0)
        cos = self.rope_cos[positions].unsqueeze(1).to(self.tok_embeddings.weight.dtype)
        sin = self.rope_sin[positions].unsqueeze(1).to(self.tok_embeddings.weight.dtype)
        x = self.tok_embeddings(tokens)
        for layer in self.layers[:n_layers]:
            x = layer(x, cos, sin, backend)
        backend.advance(tokens.shape[1])
        return x

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the vocabulary head, for just the rows someone samples from."""
        return self.output(self.norm(hidden))


def store_wide_weights_column_major(model: Transformer, min_ratio: int = 2) -> None:
    """Lay out projections with out ≥ min_ratio × in (fused gate/up, the vocabulary head) column-major."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            out_features, in_features = module.weight.shape
            if out_features >= min_ratio * in_features and module.weight.is_contiguous():
                module.weight.data = module.weight.data.t().contiguous().t()
