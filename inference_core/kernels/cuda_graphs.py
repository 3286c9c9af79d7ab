"""Whether a model's steps replay CUDA graphs."""
from __future__ import annotations

import torch

from ..model.config import engine_settings


def graphable(model, device: torch.device) -> bool:
    """A CUDA device, and every layer a graph may record: each quantized linear says whether it is `capturable`."""
    return device.type == "cuda" and all(getattr(m, "capturable", True) for m in model.modules())


def graphs_enabled(model, device: torch.device) -> bool:
    """Graphs are used now: `graphable`, and not turned off by INFERENCE_CUDA_GRAPHS=0 (read at every call)."""
    return engine_settings().cuda_graphs and graphable(model, device)
