"""Quantized linear layers: packed weights as buffers, y = x Wᵀ by the fastest kernel available."""
from __future__ import annotations

import collections
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels import onednn_linears, quant_kernels, triton_kernels
from ..model.config import engine_settings
from .formats import (INT4_LUT, NF4_CODEBOOK, QuantFormat, dequantize_fp8, dequantize_int4, dequantize_int8,
                      dequantize_nf4, parse_format, quantize_fp8, quantize_int4, quantize_int8, quantize_nf4)

# Above this many rows (prefill, perplexity windows) the weight is dequantized once per call and handed to
# the fp32 GEMM: compute-bound work amortizes the decode, and the GEMV kernels re-read weights per row.
GEMV_MAX_ROWS = 8
# On a GPU the fused Triton kernels take decode-sized inputs (a batch step, a verify); a prefill's many rows are
# compute-bound, where dequantize + cuBLAS wins. At least the step graphs' largest bucket (paged_graphs.BUCKETS):
# a captured step must never dequantize per call.
TRITON_MAX_ROWS = 64


class QuantizedLinear(nn.Module):
    """Base: packed tensors as buffers, y = x Wᵀ computed by `kernel` (named for reports)."""
    fmt: QuantFormat
    kernel: str

    def __init__(self, in_features: int, out_features: int, fmt: QuantFormat) -> None:
        super().__init__()
        self.in_features, self.out_features, self.fmt = in_features, out_features, fmt
        self.register_buffer("bias", None)  # fp32 when set, kept exact (Qwen2's Q/K/V projections have one)

    def dequantize(self) -> torch.Tensor:
        raise NotImplementedError

    def _gemv(self, x2: torch.Tensor) -> torch.Tensor | None:
        """The fast path for few rows, or None when no compiled kernel is available."""
        return None

    def weight_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers())

    @property
    def capturable(self) -> bool:
        """A CUDA graph may record this layer: it runs a fused Triton kernel (never syncs, never dequantizes)."""
        return self.kernel.startswith("triton-")

    def fused_view(self, native):
        """This layer's weights for the fused CPU step (`native.make_linear`), or None: no kernel for it."""
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.product(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def product(self, x2: torch.Tensor) -> torch.Tensor:
        """x2 Wᵀ for rows x2 [M, in] with the quantized W (subclasses with their own arithmetic override this)."""
        y = None
        if x2.shape[0] <= GEMV_MAX_ROWS and x2.dtype == torch.float32 and x2.device.type == "cpu":
            y = self._gemv(x2.contiguous())
        elif x2.device.type == "cuda" and x2.shape[0] <= TRITON_MAX_ROWS and self.kernel.startswith("triton-"):
            from ..kernels.triton_kernels import quant_matmul

            y = quant_matmul.product(x2, self)
        return y if y is not None else F.linear(x2, self.dequantize().to(x2.dtype))

    def extra_repr(self) -> str:
        return f"{self.in_features}→{self.out_features}, {self.fmt.name}, kernel={self.kernel}"


def _kernels():
    return quant_kernels.load(engine_settings())


def _kernel_name(weight: torch.Tensor, compiled: str, gpu: str, fallback: str = "torch-dequant") -> str:
    """AVX2 on CPU tensors, fused Triton on CUDA ones; without them the weight is dequantized per call."""
    if weight.device.type == "cpu":
        return compiled if _kernels() else fallback
    if weight.device.type == "cuda" and triton_kernels.available():
        return gpu
    return fallback


@dataclass(frozen=True)
class Packing:
    """One weight-only format's differences: how it packs a weight and reads it back, its native kernel
    (`gemv` in quant_kernels, `native` the fused step's weight kind) and the kernel names reports show."""
    quantize: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]]  # (weight, group) → codes, scales
    dequantize: Callable[..., torch.Tensor]  # (codes, scales, group, codebook) → fp32 weight
    gemv: str
    native: int  # make_linear's kind: 1 int8, 2 fp8 bits, 3 4-bit lookup (NF4), 4 int4
    cpu_kernel: str
    gpu_kernel: str


INT8 = Packing(lambda w, g: quantize_int8(w), lambda q, s, g, book: dequantize_int8(q, s), "int8_gemv", 1,
               "avx2-int8-gemv", triton_kernels.KERNEL_INT8)
PACKINGS = {  # w8a8 and LLM.int8() keep int8's weights and change the product
    "int8": INT8, "w8a8": INT8, "llm-int8": INT8,
    "fp8": Packing(lambda w, g: quantize_fp8(w), lambda q, s, g, book: dequantize_fp8(q, s), "fp8_gemv", 2,
                   "avx2-fp8-gemv", triton_kernels.KERNEL_FP8),
    "int4": Packing(quantize_int4, lambda q, s, g, book: dequantize_int4(q, s, g), "lut4_gemv", 4,
                    "avx2-int4-lut-gemv", triton_kernels.KERNEL_INT4),
    "nf4": Packing(quantize_nf4, dequantize_nf4, "lut4_gemv", 3, "avx2-nf4-lut-gemv", triton_kernels.KERNEL_NF4),
}


class PackedLinear(QuantizedLinear):
    """Weight-only int8, fp8, int4 or NF4: `qweight` holds the codes (4-bit ones two per byte), `scale` one
    scale per output row or per `fmt.group` inputs; NF4 keeps its `codebook` on the weights' device."""

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        self.packing = PACKINGS[fmt.kind]
        q, s = self.packing.quantize(weight, fmt.group)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.register_buffer("codebook", NF4_CODEBOOK.to(weight.device, copy=True) if fmt.kind == "nf4" else None)
        self.kernel = _kernel_name(weight, self.packing.cpu_kernel, self.packing.gpu_kernel.format(group=fmt.group))

    @property
    def codes(self) -> torch.Tensor:
        """The codes as the kernels read them: fp8 as its bits (uint8)."""
        return self.qweight.view(torch.uint8) if self.fmt.kind == "fp8" else self.qweight

    def dequantize(self):
        return self.packing.dequantize(self.qweight, self.scale, self.fmt.group, self.codebook)

    def _gemv(self, x2):
        k = _kernels()
        lut = self.codebook.half() if self.codebook is not None else INT4_LUT  # 4-bit code → value
        group_args = (self.fmt.group, lut) if self.fmt.group else ()
        return getattr(k, self.packing.gemv)(x2, self.codes, self.scale, *group_args) if k else None

    def fused_view(self, native):
        lut = self.codebook.half() if self.codebook is not None else None
        return native.make_linear(self.packing.native, self.codes, self.scale, self.bias, self.fmt.group, lut)


def fbgemm_available() -> bool:
    return "fbgemm" in torch.backends.quantized.supported_engines or "x86" in torch.backends.quantized.supported_engines


class W8A8DynamicLinear(PackedLinear):
    """int8 weights, also prepacked for FBGEMM, × activations quantized per call (7-bit uint8), int32 accumulation."""

    fused_view = QuantizedLinear.fused_view  # the fused step has no kernel that quantizes activations

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight, fmt)
        q, s = self.qweight, self.scale
        self._packed = None
        self.onednn_packed = None  # onednn_linears.w8a8_product's prepacked weight, made at the first long step
        if fbgemm_available() and weight.device.type == "cpu":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                qt = torch._make_per_channel_quantized_tensor(q, s.double(), torch.zeros_like(s, dtype=torch.long), 0)
                self._packed = torch.ops.quantized.linear_prepack(qt, None)
        self.kernel = "fbgemm-linear-dynamic" if self._packed is not None else "torch-emulated-w8a8"

    def weight_bytes(self) -> int:
        # What a decode step reads: one int8 copy (FBGEMM's prepacked one) + scales. Memory holds two copies:
        # `prepacked_bytes` is the second.
        return self.qweight.nbytes + self.scale.nbytes + (self.bias.nbytes if self.bias is not None else 0)

    def prepacked_bytes(self) -> int:
        """FBGEMM's prepacked copy beside `qweight` (not a buffer: `resident_bytes` adds it)."""
        return self.qweight.nbytes + 12 * self.out_features if self._packed is not None else 0

    def product(self, x2):
        if self._packed is not None and x2.shape[0] == 1 and x2.dtype == torch.float32:
            return torch.ops.quantized.linear_dynamic(x2, self._packed, True)
        if onednn_linears.int8_applies(x2):  # a long step on AMX int8: the same integers as below
            return onednn_linears.w8a8_product(x2.float(), self).to(x2.dtype)
        return F.linear(fake_quant_activations(x2.float()), self.dequantize()).to(x2.dtype)


def fake_quant_activations(x2: torch.Tensor) -> torch.Tensor:
    """Per-row FBGEMM-style activation quantization onto 0..127 (7 bits), returned dequantized: (q - zp) · scale."""
    codes, scale = onednn_linears.quantize_rows(x2)
    return codes.float() * scale


class LLMInt8Linear(PackedLinear):
    """LLM.int8() mixed decomposition (Dettmers et al. 2022): int8 weights, outlier input columns in fp32."""

    fused_view = QuantizedLinear.fused_view  # the fused step has no outlier columns

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat, threshold: float = 6.0) -> None:
        super().__init__(weight, fmt)
        self.threshold = threshold
        self.outlier_counts: collections.deque[int] = collections.deque(maxlen=1024)
        self.kernel = _kernel_name(weight, "avx2-int8-gemv+fp32-outliers", "torch-llm-int8", "torch-llm-int8")

    def product(self, x):
        x2 = x.float()
        outlier = (x2.abs() > self.threshold).any(dim=0)
        n_out = int(outlier.sum())
        self.outlier_counts.append(n_out)
        regular = x2.masked_fill(outlier, 0.0)
        sx = regular.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127.0
        qx = (torch.round(regular / sx) * sx).contiguous()  # int8 activation values, kept as fp32 × scale
        y = self._gemv(qx) if x2.shape[0] <= GEMV_MAX_ROWS and qx.device.type == "cpu" else None
        if y is None:
            y = F.linear(qx, self.dequantize())
        if n_out:
            cols = outlier.nonzero()[:, 0]
            y = y + x2[:, cols] @ (self.qweight[:, cols].float() * self.scale[:, None]).T
        return y.to(x.dtype)  # computed in fp32; a bf16 model gets bf16


class BitsAndBytesLinear(QuantizedLinear):
    """bitsandbytes' own CUDA layer (`Linear8bitLt` or `Linear4bit` NF4), quantized on its move to the GPU;
    inputs and outputs are cast, so the fp32 model around it is unchanged."""

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        if weight.device.type != "cuda":
            raise ValueError(f"{fmt.name} is bitsandbytes' CUDA backend: quantize a model on a CUDA device")
        try:
            import bitsandbytes as bnb
        except Exception as exc:  # noqa: BLE001 - missing, or built for another CUDA
            raise ValueError(f"{fmt.name} needs bitsandbytes ({type(exc).__name__}: {exc})") from exc
        cpu = weight.detach().cpu()
        if fmt.kind == "bnb-int8":
            self.inner = bnb.nn.Linear8bitLt(self.in_features, self.out_features, bias=False,
                                             has_fp16_weights=False, threshold=6.0)
            self.inner.weight = bnb.nn.Int8Params(cpu.half(), requires_grad=False, has_fp16_weights=False)
            self.kernel = "bitsandbytes-int8-matmul"
        else:
            self.inner = bnb.nn.Linear4bit(self.in_features, self.out_features, bias=False,
                                           compute_dtype=torch.float32, quant_type="nf4")
            self.inner.weight = bnb.nn.Params4bit(cpu.float(), requires_grad=False, quant_type="nf4",
                                                  blocksize=fmt.group)
            self.kernel = "bitsandbytes-nf4-gemv"
        self.inner = self.inner.to(weight.device)

    def weight_bytes(self) -> int:
        w = self.inner.weight
        extra = [getattr(w, "SCB", None)]
        state = getattr(w, "quant_state", None)
        if state is not None:
            extra.append(state.absmax)
        return w.data.nbytes + sum(t.nbytes for t in extra if isinstance(t, torch.Tensor))

    def dequantize(self) -> torch.Tensor:
        w = self.inner.weight
        if self.fmt.kind == "bnb-int8":
            return w.data.float() * (w.SCB.float()[:, None] / 127.0)
        import bitsandbytes.functional as bf

        return bf.dequantize_4bit(w.data, w.quant_state).float()

    def product(self, x: torch.Tensor) -> torch.Tensor:
        if self.fmt.kind == "bnb-int8":
            return self.inner(x.half()).to(x.dtype)
        return self.inner(x).to(x.dtype)


LINEAR_CLASSES: dict[str, type[QuantizedLinear]] = {
    "int8": PackedLinear, "w8a8": W8A8DynamicLinear, "int4": PackedLinear, "nf4": PackedLinear, "fp8": PackedLinear,
    "llm-int8": LLMInt8Linear, "bnb-int8": BitsAndBytesLinear, "bnb-nf4": BitsAndBytesLinear,
}


def quantize_linear(linear: nn.Linear | torch.Tensor, fmt: QuantFormat | str) -> QuantizedLinear:
    """A quantized copy of `linear` (or of a bare weight). A bias stays fp32 and is added after the product."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    weight = linear.weight if isinstance(linear, nn.Linear) else linear
    layer = LINEAR_CLASSES[fmt.kind](weight.detach().float(), fmt)
    if isinstance(linear, nn.Linear) and linear.bias is not None:
        if fmt.kind.startswith("bnb"):
            raise ValueError(f"{fmt.name}: the bitsandbytes backend here takes bias-free projections")
        layer.bias = linear.bias.detach().float().clone()
    return layer


def quantized_linears(model: nn.Module) -> dict[str, QuantizedLinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, QuantizedLinear)}
