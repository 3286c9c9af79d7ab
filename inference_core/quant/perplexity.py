"""Quality of a (quantized) model on the shipped held-out text: perplexity, and KL divergence against fp32."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..engine.paged import PagedBackend, PagedKVPool, SeqSlice
from ..model.kv_cache import AttentionBackend, NoCache

HELDOUT_PATH = Path(__file__).parents[1] / "data" / "heldout.txt"


def heldout_ids(tokenizer, max_tokens: int | None = None) -> list[int]:
    ids = tokenizer.encode(HELDOUT_PATH.read_text(encoding="utf-8"))
    return ids[:max_tokens] if max_tokens else ids


def windows(ids: list[int], window: int) -> list[list[int]]:
    """Non-overlapping windows; a final remainder shorter than 2 tokens predicts nothing and is dropped."""
    return [ids[i:i + window] for i in range(0, len(ids), window) if len(ids[i:i + window]) >= 2]


@dataclass
class QualityStats:
    """Running sums over predicted positions (invariant: n counts every position added)."""
    nll_sum: float = 0.0
    kl_sum: float = 0.0
    top1_agree: int = 0
    n: int = 0

    def to_dict(self) -> dict:
        n = self.n or float("nan")  # nothing predicted: every mean is nan
        return {"perplexity": math.exp(self.nll_sum / n), "kl_vs_fp32": self.kl_sum / n,
                "top1_agreement": self.top1_agree / n, "n_predicted": self.n}


@torch.inference_mode()
def compare(models: dict[str, nn.Module], reference: nn.Module, ids: list[int], window: int = 512,
            backends: dict[str, Callable[[int], AttentionBackend]] | None = None) -> dict[str, QualityStats]:
    """Score every model on the same windows; the reference's log-probs are computed once per window."""
    backends = backends or {}
    stats = {name: QualityStats() for name in models}
    for chunk in windows(ids, window):
        tokens = torch.tensor([chunk])
        positions = torch.arange(len(chunk))
        targets = tokens[0, 1:]
        ref_logp = F.log_softmax(reference(tokens, positions, NoCache())[0, :-1].float(), dim=-1)
        for name, model in models.items():
            backend = backends[name](len(chunk)) if name in backends else NoCache()
            logp = ref_logp if (model is reference and name not in backends) else F.log_softmax(
                model(tokens, positions, backend)[0, :-1].float(), dim=-1)
            s = stats[name]
            s.nll_sum += float(-logp.gather(1, targets[:, None]).sum())
            # KL(ref ‖ model) = Σ p_ref (log p_ref − log p_model), per position
            kl = (ref_logp.exp() * (ref_logp - logp)).sum(dim=1)
            s.kl_sum += float(kl.sum())
            s.top1_agree += int((logp.argmax(1) == ref_logp.argmax(1)).sum())
            s.n += len(chunk) - 1
    return stats


def paged_backend(model: nn.Module, kv_dtype: str = "int8", block_size: int = 16) -> Callable[[int], AttentionBackend]:
    """A `compare` backend factory: each window is one prefill over a fresh paged pool of `kv_dtype` (int8:
    the rounded K/V that decoding reads)."""
    cfg, weight = model.config, model.tok_embeddings.weight

    def make(n_tokens: int) -> AttentionBackend:
        n_blocks = -(-n_tokens // block_size)
        pool = PagedKVPool(cfg.n_layers, n_blocks, cfg.n_kv_heads, block_size, cfg.head_dim, weight.dtype,
                           weight.device, kv_dtype)
        backend = PagedBackend(pool)
        backend.begin_step([SeqSlice(0, n_tokens, n_tokens, list(range(n_blocks)))])
        return backend

    return make
