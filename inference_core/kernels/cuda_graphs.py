"""Whether a model's steps replay CUDA graphs.

At 135M parameters a decode step on a GPU is launch-bound, not bandwidth-bound: 30 layers × ~15 kernels,
each a few microseconds of CPU-side launch, cost far more than reading 0.5 GB of weights at 3 TB/s.
A CUDA graph records the step's kernels once and replays them with one launch. The graphs themselves are the
paged step graphs (paged_graphs.py), one per token-count bucket over a lent pool: batch-1 decode replays the
bucket-1 graph, a batch of decodes or a speculative verify a larger one. This module only decides whether
they are used.
"""
from __future__ import annotations

import torch

from ..model.config import engine_settings


def graphable(model, device: torch.device) -> bool:
    """A CUDA device, and every layer a graph may record: each quantized linear says whether it is `capturable`."""
    return device.type == "cuda" and all(getattr(m, "capturable", True) for m in model.modules())


def graphs_enabled(model, device: torch.device) -> bool:
    """Graphs are used now: `graphable`, and not turned off by INFERENCE_CUDA_GRAPHS=0 (read at every call)."""
    return engine_settings().cuda_graphs and graphable(model, device)
