"""Fused Triton GPU kernels for the engine (issue 13): quantized matmuls and paged-decode attention."""
from __future__ import annotations

import importlib.util
import os

# Names for reports and the dashboard ("device · dtype · kernel").
KERNEL_INT8 = "triton-int8"
KERNEL_FP8 = "triton-fp8"
KERNEL_INT4 = "triton-int4-g{group}"  # formatted with the layer's group: triton-int4-g128
KERNEL_NF4 = "triton-nf4"
KERNEL_PAGED_DECODE = "triton-paged-decode"


def interpreted() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def why_unavailable() -> str:
    """Empty when the kernels can run here; otherwise the reason, for reports."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    try:
        import triton  # noqa: F401 - importable, not only present
    except Exception as exc:  # noqa: BLE001 - a broken install or a missing shared library
        return f"triton does not import ({type(exc).__name__}: {exc})"
    if interpreted():
        return ""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device (TRITON_INTERPRET=1 runs the kernels on CPU in Triton's interpreter)"
    return ""


def available() -> bool:
    """Triton importable and either a CUDA device present or the interpreter switched on."""
    return not why_unavailable()
