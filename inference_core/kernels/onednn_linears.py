"""Long CPU steps: the reference's linears on oneDNN, on AMX where the CPU has it: fp32 by default, bf16 when chosen
(INFERENCE_LONG_STEP_PRECISION), w8a8's exact int8 product; INFERENCE_AMX=off/on overrides the CPU's flags.
Paths, precision and figures: docs/deploy.md, "CPU hosts: long steps on AMX"."""
from __future__ import annotations

import os
import weakref
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

MIN_ROWS = 64  # below this the fused step (or MKL, whose small-M path is tuned) takes the work anyway
KERNEL = "torch reference, oneDNN linears"
KERNEL_BF16 = "torch reference, oneDNN AMX bf16 linears"


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as the kernel reports them (empty where /proc/cpuinfo is absent); read per long step,
    which takes far longer than the read."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return frozenset(next((ln.split(":", 1)[1] for ln in info.splitlines() if ln.startswith("flags")), "").split())


def setting(name: str, choices: tuple[str, ...]) -> str:
    """An environment switch, read per step (the first choice is its default); anything else is a clear error."""
    value = os.environ.get(name, choices[0]).lower()
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


# What oneDNN needs to run a `kind` product exactly without AMX tiles, for INFERENCE_AMX=on to force it: bf16 on
# AVX-512 cores; s8×s8 with VNNI (AVX2's vpmaddubsw saturates). Elsewhere "on" is "auto" (Zen 3 failed both).
FORCEABLE = {"bf16": "avx512bw", "int8": "avx512_vnni"}


def amx(kind: str) -> bool:
    """Whether long steps may use AMX's `kind` ("bf16" or "int8") tiles: the CPU has them (flag amx_<kind>),
    unless INFERENCE_AMX says otherwise ("off": never, "on": also where oneDNN runs the op exactly, FORCEABLE)."""
    override, flags = setting("INFERENCE_AMX", ("auto", "on", "off")), cpu_flags()
    forced = override == "on" and FORCEABLE[kind] in flags
    return available() and override != "off" and (f"amx_{kind}" in flags or forced)


def long_step_mode(bf16_weights: dict) -> OneDnnLinears:
    """A long step's mode: bf16 where asked for and the CPU has AMX bf16, else fp32 (`bf16_weights`: the runner's)."""
    bf16 = setting("INFERENCE_LONG_STEP_PRECISION", ("fp32", "bf16")) == "bf16" and amx("bf16")
    return OneDnnLinears(bf16_weights if bf16 else None)


class OneDnnLinears(TorchFunctionMode):
    """Inside `with OneDnnLinears():`, F.linear of fp32 CPU tensors with ≥ MIN_ROWS rows runs on oneDNN; given a
    `bf16_weights` cache (a parameter's bf16 copy), in bf16 on AMX, the output and the bias in fp32."""

    def __init__(self, bf16_weights: dict | None = None) -> None:
        super().__init__()
        self.bf16_weights = bf16_weights
        self.bf16 = bf16_weights is not None
        self.kernel = KERNEL if bf16_weights is None else KERNEL_BF16

    def _bf16(self, weight: torch.Tensor) -> torch.Tensor:
        # row-major whatever the fp32 weight's layout: oneDNN's bf16 GEMM runs column-major weights ~1.5x slower
        if not isinstance(weight, nn.Parameter):
            return weight.to(torch.bfloat16, memory_format=torch.contiguous_format)
        ref_and_copy = self.bf16_weights.get(id(weight))
        if ref_and_copy is None or ref_and_copy[0]() is not weight:
            copy = weight.detach().to(torch.bfloat16, memory_format=torch.contiguous_format)
            ref_and_copy = self.bf16_weights[id(weight)] = (weakref.ref(weight), copy)
        return ref_and_copy[1]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if (x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
                    and x.numel() >= MIN_ROWS * x.shape[-1]):
                if not (weight.is_contiguous() or weight.t().is_contiguous()):
                    weight = weight.contiguous()  # a padded view (int4's dequantized groups) sends oneDNN to a slow path
                if self.bf16_weights is None:
                    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
                y = torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self._bf16(weight), None, "none",
                                                       [], "").float()
                return y if bias is None else y + bias
        return func(*args, **kwargs)


def int8_applies(x2: torch.Tensor) -> bool:
    return (x2.device.type == "cpu" and x2.shape[0] >= MIN_ROWS and hasattr(torch.ops, "onednn")
            and hasattr(torch.ops.onednn, "qlinear_pointwise") and amx("int8"))


def quantize_rows(x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w8a8's per-row activation quantization onto 0..127 with a zero point, as signed codes c = q - zp (both in
    0..127, so c fits int8 and needs no zero-point term): x ≈ c · scale."""
    lo = x2.amin(dim=1, keepdim=True).clamp(max=0)
    hi = x2.amax(dim=1, keepdim=True).clamp(min=0)
    scale = ((hi - lo) / 127.0).clamp_min(1e-12)
    zp = torch.round(-lo / scale).clamp(0, 127)
    q = torch.round(x2 / scale + zp).clamp(0, 127)
    return (q - zp).to(torch.int8), scale


def w8a8_product(x2: torch.Tensor, layer) -> torch.Tensor:
    """x2 [rows, in] fp32 × `layer`'s int8 weight (qweight [out, in], per-row scale) on AMX int8:
    y = s_x · (Σ c q_w) · s_w, the integer sums exact in int32 (s8 × s8 tiles)."""
    packed = layer.onednn_packed  # prepacked for oneDNN at the layer's first long step, kept on the layer
    if packed is None:
        w_scale = layer.scale.float().contiguous()
        packed = layer.onednn_packed = (torch.ops.onednn.qlinear_prepack(layer.qweight.contiguous(), None), w_scale,
                                        torch.zeros_like(w_scale, dtype=torch.long))
    weight, w_scale, w_zp = packed
    codes, scale = quantize_rows(x2)
    return scale * torch.ops.onednn.qlinear_pointwise(codes, 1.0, 0, weight, w_scale, w_zp, None, 1.0, 0,
                                                      torch.float32, "none", [], "")
