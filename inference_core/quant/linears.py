"""Weight quantization: formats, real packed storage, quantized linear layers, and `quantize_model`.

Formats (`parse_format` names):
  * `int8`      — per-output-channel absmax int8 weights, fp32 activations (weight-only, W8A32).
  * `w8a8`      — the same int8 weights × activations quantized to int8 per call (FBGEMM's dynamic linear).
  * `int4-gG`   — symmetric int4 in groups of G ∈ {32, 64, 128} along the input dim (`int4` = `int4-g128`).
  * `nf4`       — 4-bit NormalFloat codebook (QLoRA), absmax per block of 64.
  * `fp8`       — float8 e4m3fn storage with a per-output-channel scale (weight-only).
  * `llm-int8`  — LLM.int8() mixed decomposition: activation columns above a threshold stay fp32.
  * `bnb-int8`, `bnb-nf4` — bitsandbytes' CUDA layers (`Linear8bitLt` with threshold 6, `Linear4bit` NF4)
    as a backend beside ours; CUDA only, and only where bitsandbytes is installed.
Every quantized layer holds only packed tensors (int8/uint8/float8 + fp32 scales); `weight_bytes` counts
their real `nbytes`. Invariant tested for every fast path: `layer(x) ≈ x @ layer.dequantize().T`.
"""
from __future__ import annotations

import collections
import copy
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels import quant_kernels, triton_kernels

# ----------------------------------------------------------------------------------------------- formats


@dataclass(frozen=True)
class QuantFormat:
    name: str
    kind: str  # "fp32" | "int8" | "w8a8" | "int4" | "nf4" | "fp8" | "llm-int8" | "bnb-int8" | "bnb-nf4"
    group: int = 0  # values sharing one scale along the input dim (0: one scale per output channel)
    bits: int = 32

    @property
    def label(self) -> str:
        return FORMAT_LABELS.get(self.kind, self.name)


FORMAT_LABELS = {
    "fp32": "fp32 (reference)",
    "int8": "int8 per-channel, weight-only",
    "w8a8": "int8 weights × int8 dynamic activations (FBGEMM)",
    "int4": "int4 symmetric, group-wise",
    "nf4": "NF4 codebook, block absmax",
    "fp8": "FP8 e4m3, per-channel scale",
    "llm-int8": "LLM.int8() int8 + fp32 outlier columns",
    "bnb-int8": "bitsandbytes LLM.int8() (CUDA)",
    "bnb-nf4": "bitsandbytes NF4 (CUDA)",
}
DEFAULT_FORMATS = ("fp32", "int8", "w8a8", "int4-g128", "nf4", "fp8")
NF4_BLOCK = 64


def parse_format(name: str) -> QuantFormat:
    """'int4' → int4-g128; 'int4-g32' → group 32; unknown names raise ValueError listing the choices."""
    key = name.strip().lower()
    simple = {"fp32": ("fp32", 0, 32), "int8": ("int8", 0, 8), "w8a8": ("w8a8", 0, 8), "fp8": ("fp8", 0, 8),
              "nf4": ("nf4", NF4_BLOCK, 4), "llm-int8": ("llm-int8", 0, 8), "bnb-int8": ("bnb-int8", 0, 8),
              "bnb-nf4": ("bnb-nf4", NF4_BLOCK, 4)}
    if key in simple:
        kind, group, bits = simple[key]
        return QuantFormat(key, kind, group, bits)
    if key == "int4":
        key = "int4-g128"
    if key.startswith("int4-g") and key[6:].isdigit() and int(key[6:]) in (32, 64, 128):
        return QuantFormat(key, "int4", int(key[6:]), 4)
    raise ValueError(f"unknown quantization format {name!r}; choose from "
                     "fp32, int8, w8a8, int4-g32, int4-g64, int4-g128, nf4, fp8, llm-int8, bnb-int8, bnb-nf4")


# ------------------------------------------------------------------------------------------ int8 / fp8


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row absmax: q = round(w / s) ∈ [-127, 127], s = max|w_row| / 127. Error ≤ s/2 per element."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q.contiguous(), scale.contiguous()


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[:, None]


FP8_MAX = 448.0  # largest finite float8_e4m3fn


def quantize_fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row scale so the row's absmax maps to 448, then round to e4m3 (3 mantissa bits, nearest-even)."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / FP8_MAX
    q = (w / scale[:, None]).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.contiguous(), scale.contiguous()


def dequantize_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[:, None]


# ----------------------------------------------------------------------------------- 4-bit: int4 / nf4


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes in [0, 16) of shape [N, K] (K % 32 == 0) → [N, K/2] bytes.

    Within each 32-value chunk, byte j holds value j (low nibble) and value j+16 (high nibble), the order
    the AVX2 kernel unpacks with one mask and one shift.
    """
    n, k = codes.shape
    if k % 32:
        raise ValueError(f"K={k} must be a multiple of 32 to pack nibbles")
    c = codes.to(torch.uint8).reshape(n, k // 32, 2, 16)
    return (c[:, :, 0] | (c[:, :, 1] << 4)).reshape(n, k // 2).contiguous()


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    n, half = packed.shape
    p = packed.reshape(n, half // 16, 16)
    return torch.stack([p & 0x0F, p >> 4], dim=2).reshape(n, half * 2)


def _grouped(w: torch.Tensor, group: int) -> torch.Tensor:
    """[N, K] → [N, ⌈K/group⌉, group], zero-padding a short last group (576 = 4·128 + 64)."""
    n, k = w.shape
    if k % 32 or group % 32:
        raise ValueError(f"K={k} and group={group} must be multiples of 32")
    pad = -k % group
    return F.pad(w.float(), (0, pad)).reshape(n, (k + pad) // group, group)


def _ungrouped(g: torch.Tensor, k: int) -> torch.Tensor:
    return g.reshape(g.shape[0], -1)[:, :k]


def quantize_int4(w: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-wise int4: q = round(w / s) ∈ [-7, 7], s = max|w_group| / 7, stored as q + 8.

    Returns (packed uint8 [N, K/2], scales fp32 [N, ⌈K/group⌉]). Error ≤ s/2 per element.
    """
    g = _grouped(w, group)
    scale = g.abs().amax(dim=2).clamp_min(1e-12) / 7.0
    q = torch.round(g / scale[..., None]).clamp_(-7, 7) + 8
    return pack_nibbles(_ungrouped(q, w.shape[1]).to(torch.uint8)), scale.contiguous()


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor, group: int) -> torch.Tensor:
    q = unpack_nibbles(packed).float() - 8
    return _ungrouped(_grouped(q, group) * scale[..., None], q.shape[1])


def nf4_codebook() -> torch.Tensor:
    """The 16 NF4 levels, computed as in QLoRA (Dettmers et al. 2023, appendix E).

    Quantiles of N(0, 1): 8 positive from p = 0.9677…0.5 and 7 negative, plus an exact zero, normalized to
    [-1, 1]. Equal-probability bins for normally distributed weights; asymmetric so that 0 is representable.
    """
    offset = 0.9677083
    pos = torch.special.ndtri(torch.linspace(offset, 0.5, 9, dtype=torch.float64)[:-1])
    neg = -torch.special.ndtri(torch.linspace(offset, 0.5, 8, dtype=torch.float64)[:-1])
    v = torch.cat([pos, torch.zeros(1, dtype=torch.float64), neg]).sort().values
    # rounded to fp16 (changes the levels by < 2.5e-4) so the AVX2 kernel's fp16 lookup table is exact
    return (v / v.abs().max()).half().float()


NF4_CODEBOOK = nf4_codebook()
INT4_LUT = (torch.arange(16, dtype=torch.float32) - 8).half()  # stored code → int4 value, for the kernel


def quantize_nf4(w: torch.Tensor, block: int = NF4_BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks of `block` values scaled by their absmax into [-1, 1], each rounded to the nearest NF4 level.

    Returns (packed uint8 [N, K/2] of codebook indices, absmax fp32 [N, ⌈K/block⌉]).
    """
    g = _grouped(w, block)
    absmax = g.abs().amax(dim=2).clamp_min(1e-12)
    normed = g / absmax[..., None]
    book = NF4_CODEBOOK.to(w.device)
    mids = (book[1:] + book[:-1]) / 2
    codes = torch.bucketize(normed.contiguous(), mids)
    return pack_nibbles(_ungrouped(codes, w.shape[1]).to(torch.uint8)), absmax.contiguous()


def dequantize_nf4(packed: torch.Tensor, absmax: torch.Tensor, block: int = NF4_BLOCK,
                   codebook: torch.Tensor | None = None) -> torch.Tensor:
    """`codebook`: the layer's copy on the weights' device (else NF4_CODEBOOK is copied there: a host → device
    copy, which a CUDA graph capture forbids)."""
    book = codebook if codebook is not None else NF4_CODEBOOK.to(packed.device)
    vals = book[unpack_nibbles(packed).long()]
    return _ungrouped(_grouped(vals, block) * absmax[..., None], vals.shape[1])


# ---------------------------------------------------------------------------------- quantized linears

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.product(x)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """x Wᵀ with the quantized W (subclasses with their own arithmetic override this, not forward)."""
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        y = None
        if x2.shape[0] <= GEMV_MAX_ROWS and x2.dtype == torch.float32 and x2.device.type == "cpu":
            y = self._gemv(x2.contiguous())
        elif x2.device.type == "cuda" and x2.shape[0] <= TRITON_MAX_ROWS and self.kernel.startswith("triton-"):
            from ..kernels.triton_kernels import quant_matmul

            y = quant_matmul.product(x2, self)
        if y is None:
            y = F.linear(x2, self.dequantize().to(x2.dtype))
        return y.reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.in_features}→{self.out_features}, {self.fmt.name}, kernel={self.kernel}"


def _kernels():
    return quant_kernels.load()


def _kernel_name(weight: torch.Tensor, compiled: str, gpu: str, fallback: str = "torch-dequant") -> str:
    """The AVX2 kernels run on CPU tensors, the fused Triton kernels (triton_kernels/quant_matmul.py) on CUDA
    ones; without them the weight is dequantized per call."""
    if weight.device.type == "cpu":
        return compiled if _kernels() else fallback
    if weight.device.type == "cuda" and triton_kernels.available():
        return gpu
    return fallback


class Int8Linear(QuantizedLinear):
    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        q, s = quantize_int8(weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.kernel = _kernel_name(weight, "avx2-int8-gemv", triton_kernels.KERNEL_INT8)

    def dequantize(self):
        return dequantize_int8(self.qweight, self.scale)

    def _gemv(self, x2):
        k = _kernels()
        return k.int8_gemv(x2, self.qweight, self.scale) if k else None


class FP8Linear(QuantizedLinear):
    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        q, s = quantize_fp8(weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.kernel = _kernel_name(weight, "avx2-fp8-gemv", triton_kernels.KERNEL_FP8)

    def dequantize(self):
        return dequantize_fp8(self.qweight, self.scale)

    def _gemv(self, x2):
        k = _kernels()
        return k.fp8_gemv(x2, self.qweight.view(torch.uint8), self.scale) if k else None


class Int4Linear(QuantizedLinear):
    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        p, s = quantize_int4(weight, fmt.group)
        self.register_buffer("packed", p)
        self.register_buffer("scale", s)
        self.kernel = _kernel_name(weight, "avx2-int4-lut-gemv", triton_kernels.KERNEL_INT4.format(group=fmt.group))

    def dequantize(self):
        return dequantize_int4(self.packed, self.scale, self.fmt.group)

    def _gemv(self, x2):
        k = _kernels()
        return k.lut4_gemv(x2, self.packed, self.scale, self.fmt.group, INT4_LUT) if k else None


class NF4Linear(QuantizedLinear):
    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        p, a = quantize_nf4(weight, fmt.group)
        self.register_buffer("packed", p)
        self.register_buffer("absmax", a)
        self.register_buffer("codebook", NF4_CODEBOOK.to(weight.device, copy=True))
        self.kernel = _kernel_name(weight, "avx2-nf4-lut-gemv", triton_kernels.KERNEL_NF4)

    def dequantize(self):
        return dequantize_nf4(self.packed, self.absmax, self.fmt.group, self.codebook)

    def _gemv(self, x2):
        k = _kernels()
        return k.lut4_gemv(x2, self.packed, self.absmax, self.fmt.group, self.codebook.half()) if k else None


def fbgemm_available() -> bool:
    return "fbgemm" in torch.backends.quantized.supported_engines or "x86" in torch.backends.quantized.supported_engines


class W8A8DynamicLinear(QuantizedLinear):
    """int8 per-channel weights prepacked for FBGEMM; each call quantizes x to uint8 (7-bit range,
    asymmetric, one scale per call) and runs an int8 GEMM with int32 accumulation.

    With one row (decode) the activation scale is per token. For many rows FBGEMM would share one scale
    across all of them, so we emulate the per-token version in fp32 instead: prefill and perplexity then
    see the same arithmetic as decode.
    """

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        q, s = quantize_int8(weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self._packed = None
        if fbgemm_available() and weight.device.type == "cpu":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                qt = torch._make_per_channel_quantized_tensor(q, s.double(), torch.zeros_like(s, dtype=torch.long), 0)
                self._packed = torch.ops.quantized.linear_prepack(qt, None)
        self.kernel = "fbgemm-linear-dynamic" if self._packed is not None else "torch-emulated-w8a8"

    def dequantize(self):
        return dequantize_int8(self.qweight, self.scale)

    def weight_bytes(self) -> int:
        # What a decode step reads: one int8 copy (FBGEMM's prepacked one) + scales. Memory holds two copies:
        # `prepacked_bytes` is the second.
        return self.qweight.nbytes + self.scale.nbytes + (self.bias.nbytes if self.bias is not None else 0)

    def prepacked_bytes(self) -> int:
        """FBGEMM's prepacked copy, held beside `qweight` (which prefill and the emulation multiply by): the same
        int8 values rearranged for its kernel, plus an int32 column offset, an fp32 scale and an int32 zero point
        per output channel. Not a parameter or buffer, so `resident_bytes` cannot see it; the report adds it."""
        return self.qweight.nbytes + 12 * self.out_features if self._packed is not None else 0

    def product(self, x):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        if self._packed is not None and x2.shape[0] == 1 and x2.dtype == torch.float32:
            y = torch.ops.quantized.linear_dynamic(x2, self._packed, True)
        else:
            y = F.linear(fake_quant_activations(x2.float()), self.dequantize()).to(x.dtype)
        return y.reshape(*shape[:-1], self.out_features)


def fake_quant_activations(x2: torch.Tensor) -> torch.Tensor:
    """Per-row FBGEMM-style dynamic activation quantization, returned dequantized: range [min(x,0),
    max(x,0)] mapped onto 0..127 (reduce_range: 7 bits so AVX2's 16-bit pair sums cannot saturate)."""
    lo = x2.amin(dim=1, keepdim=True).clamp(max=0)
    hi = x2.amax(dim=1, keepdim=True).clamp(min=0)
    scale = ((hi - lo) / 127.0).clamp_min(1e-12)
    zp = torch.round(-lo / scale).clamp(0, 127)
    q = torch.round(x2 / scale + zp).clamp(0, 127)
    return (q - zp) * scale


class LLMInt8Linear(QuantizedLinear):
    """LLM.int8() mixed decomposition (Dettmers et al. 2022).

    Input columns where any |x| > threshold are "outlier dimensions": their product uses fp32 activations
    (× the dequantized weight columns). All other columns are rounded to int8 per row (absmax) and multiplied
    by the int8 weights; the integer products are summed in fp32 (by the AVX2 int8 kernel at decode, by one
    GEMM for many rows), which matches int32 accumulation up to fp32 rounding.
    `outlier_counts` records the outlier-column count of the last 1024 calls (bounded: a worker process
    may keep one of these models for days), for the report and the demo.
    """

    def __init__(self, weight: torch.Tensor, fmt: QuantFormat, threshold: float = 6.0) -> None:
        super().__init__(weight.shape[1], weight.shape[0], fmt)
        q, s = quantize_int8(weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.threshold = threshold
        self.outlier_counts: collections.deque[int] = collections.deque(maxlen=1024)
        self.kernel = _kernel_name(weight, "avx2-int8-gemv+fp32-outliers", "torch-llm-int8", "torch-llm-int8")

    def dequantize(self):
        return dequantize_int8(self.qweight, self.scale)

    def _gemv(self, x2):
        k = _kernels()
        return k.int8_gemv(x2, self.qweight, self.scale) if k else None

    def product(self, x):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).float()
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
        return y.to(x.dtype).reshape(*shape[:-1], self.out_features)  # computed in fp32; a bf16 model gets bf16


class BitsAndBytesLinear(QuantizedLinear):
    """bitsandbytes' own CUDA layer holding the weight: `Linear8bitLt` (int8 with fp16 outlier columns above
    6.0, computing in fp16) or `Linear4bit` (NF4, blocks of 64, computing in fp32). The fp32 model around
    it is unchanged: inputs and outputs are cast. Quantization happens on bitsandbytes' move to the GPU."""

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
    "int8": Int8Linear, "w8a8": W8A8DynamicLinear, "int4": Int4Linear, "nf4": NF4Linear, "fp8": FP8Linear,
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


# ------------------------------------------------------------------------------------------ whole model

PROJECTIONS = ("attention.wqkv", "attention.wo", "feed_forward.w_gate_up", "feed_forward.w_down")


def quantize_model(model: nn.Module, fmt: QuantFormat | str, inplace: bool = False) -> nn.Module:
    """Swap every block's wqkv, wo, w_gate_up, w_down and the output head for quantized linears.

    The head is tied to the embedding: the embedding stays fp32 (a lookup reads one row per token) and the
    head gets its own quantized copy. With `inplace=False` (default) the input model is left untouched and
    the returned copy shares its fp32 tensors (embedding, norms, RoPE tables) instead of duplicating them.
    """
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    if not inplace:
        shared = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
        model = copy.deepcopy(model, memo=shared)
    if fmt.kind == "fp32":
        return model
    for block in model.layers:
        for path in PROJECTIONS:
            parent_name, attr = path.split(".")
            parent = getattr(block, parent_name)
            setattr(parent, attr, quantize_linear(getattr(parent, attr), fmt))
    model.output = quantize_linear(model.output, fmt)
    model.quant_format = fmt
    return model


def quantized_linears(model: nn.Module) -> dict[str, QuantizedLinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, QuantizedLinear)}


def matmul_weight_bytes(model: nn.Module) -> int:
    """Bytes of every matrix a decode step multiplies by (the projections and the head), as stored."""
    total = 0
    for block in model.layers:
        for path in PROJECTIONS:
            parent_name, attr = path.split(".")
            total += _linear_bytes(getattr(getattr(block, parent_name), attr))
    return total + _linear_bytes(model.output)


def _linear_bytes(m: nn.Module) -> int:
    if isinstance(m, QuantizedLinear):
        return m.weight_bytes()
    return m.weight.nbytes


def resident_bytes(model: nn.Module) -> int:
    """Bytes of every distinct parameter and persistent buffer (tied tensors once)."""
    seen: dict[int, int] = {}
    for t in list(model.parameters()) + [b for n, b in model.named_buffers() if "rope_" not in n]:
        seen[t.data_ptr()] = t.nbytes
    return sum(seen.values())
