"""Long fp32 steps on the CPU: the reference forward's linears through oneDNN's GEMM instead of MKL's."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

MIN_ROWS = 64  # below this the fused step (or MKL, whose small-M path is tuned) takes the work anyway
KERNEL = "torch reference, oneDNN linears"


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class OneDnnLinears(TorchFunctionMode):
    """Inside `with OneDnnLinears():`, F.linear of fp32 CPU tensors with ≥ MIN_ROWS rows runs on oneDNN."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if (x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
                    and x.numel() >= MIN_ROWS * x.shape[-1]):
                return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return func(*args, **kwargs)
