"""Trace events of the quantization demo (documented in docs/trace-schema/quant.md)."""
from __future__ import annotations

from .trace import TraceEvent, event


@event("quant_layer")
class QuantLayer(TraceEvent):
    """One projection of one block, quantized in the chosen format: what the grid does to its weights."""

    format: str
    layer: int
    projection: str
    shape: list[int]  # [out_features, in_features]
    kernel: str
    fp32_bytes: int
    quant_bytes: int  # real nbytes of the packed tensors (+ scales)
    hist_edges: list[float]  # weight histogram (all weights of the matrix)
    hist_counts: list[int]
    grid: list[float]  # representable values of one typical group (median scale), in weight units
    grid_scale: float
    heatmap: list[list[float]]  # |w − dequant(w)| for the top-left tile, rows × cols
    rmse: float
    max_abs_error: float
    rel_rmse: float  # rmse / rms(w)


@event("quant_outliers")
class QuantOutliers(TraceEvent):
    """Activation magnitudes entering each block's projections for the student's prompt (fp32 run)."""

    threshold: float
    layer: int
    channel_absmax: list[float]  # the chosen layer's input to `projection`: max |x| over tokens, per channel
    projection: str
    outliers_per_layer_attn: list[int]  # channels above threshold entering wqkv, one count per block
    outliers_per_layer_mlp: list[int]  # … entering w_down
    top_channels: list[int]


@event("quant_token")
class QuantToken(TraceEvent):
    variant: str  # "fp32" or the format name
    step: int
    token_id: int
    text: str
    step_time_s: float
    same_as_fp32: bool  # the quantized token equals fp32's token at this step (always true for fp32)


@event("quant_summary")
class QuantSummary(TraceEvent):
    format: str
    kernels: list[str]
    fp32_matmul_bytes: int
    quant_matmul_bytes: int
    fp32_decode_tokens_per_s: float
    quant_decode_tokens_per_s: float
    n_generated: int
    first_divergence: int  # step of the first differing token; -1 if the texts agree
    agreement: float  # fraction of steps with the same token
    fp32_text: str
    quant_text: str


@event("quant_formats")
class QuantFormats(TraceEvent):
    """The recorded `quantize-report` table (bytes, perplexity, KL, decode speed), for the trade-off chart."""

    source: str  # the command and date that produced the rows
    rows: list[dict]
