"""Trace events of the course's own demos, beyond the engine's (`inference_core.engine.trace`, `inference_core.engine.paged_trace`).

Registered in the engine's shared registry with `inference_core.engine.trace.event`, so `validate_event` knows them in any
process that imported the catalog (the worker, the tests). Documented in docs/trace-schema/course-demos.md
(prefill vs decode, FlashAttention, serving load) and docs/trace-schema/quant.md (quantization). All times are
seconds, sizes bytes, rates per second. Importing this module loads no torch (the web process imports it).
"""
from __future__ import annotations

import typing

from inference_core.engine.trace import TraceEvent, event

# --- prefill-decode, flash-attention, serving-load --------------------------------------------------------

@event("prefill_decode_summary")
class PrefillDecodeSummary(TraceEvent):
    """Aggregates of one generate() run, split by phase. Rates are achieved (measured), not peak."""

    n_prompt_tokens: int
    n_generated: int
    ttft_s: float  # the prefill forward (prompt → first token)
    tpot_s: float  # mean decode step after the first token
    itl_s: list[float]  # every inter-token gap (one per decode step)
    prefill_tokens_per_s: float  # prompt tokens processed per second during prefill
    decode_tokens_per_s: float
    prefill_flops_per_s: float
    decode_flops_per_s: float
    decode_bytes_per_s: float  # median over decode steps of bytes_moved / step_time_s
    prefill_intensity: float  # FLOPs per byte moved in the prefill forward
    decode_intensity: float  # the same for one decode step
    weight_bytes: int  # weights every forward reads once


@event("machine_roofs")
class MachineRoofs(TraceEvent):
    """This server's ceilings a run's forward passes are drawn against on a roofline: the memory bandwidth and
    matmul rate its demo worker measured while idle (serverprofile.figures), or the recorded fallback before any
    worker published one. Measured, not a datasheet's peak."""

    label: str  # the machine, as the roofline calculator names it
    bandwidth_bytes_per_s: float  # a 256 MiB copy: bytes read + written per second
    peak_flops_per_s: float  # fp32 1024 × 1024 × 1024 matmul
    note: str  # when and how it was measured
    live: bool  # published by this server's worker; False: the recorded fallback


@event("attention_compare")
class AttentionCompare(TraceEvent):
    """Naive vs tiled attention on the real q/k/v of one layer for the student's prompt."""

    layer: int
    n_tokens: int
    tokens: list[str]
    n_heads: int
    n_kv_heads: int
    head_dim: int
    dtype: str
    block_q: int
    block_k: int
    max_abs_diff: float  # tiled vs naive
    max_abs_diff_sdpa: float  # tiled vs torch's scaled_dot_product_attention (what the engine uses)
    naive_time_s: float
    tiled_time_s: float
    naive_score_bytes: int  # the materialized [1, heads, N, N] score tensor
    tile_bytes: int  # the largest score tile the tiled pass holds: [1, heads, block_q, block_k]
    tiles_computed: int
    tiles_skipped: int
    last_row_weights: list[float]  # the last token's attention over the prompt, averaged over heads


@event("flash_tile_walk")
class FlashTileWalk(TraceEvent):
    """The online softmax tile by tile for the chosen head of the captured layer (and every head when they fit
    the size budget): after each computed (query tile, key tile), that query tile's running max `m`, running sum
    `l` and unnormalized output accumulator `acc` per query row, and the factor exp(m_old − m_new) that rescaled
    `l` and `acc` first."""

    head: int  # the query head chosen by the run (its KV head is head // (n_heads / n_kv_heads)); `tiles` are its
    n_tokens: int
    block_q: int
    block_k: int
    n_q_blocks: int
    n_k_blocks: int
    acc_dims: int  # the first acc_dims of the head's dimensions are kept in `acc`
    q_blocks: list[int]  # the query tiles walked, in order: every one, or as many as the size budget allows
    tiles: list[dict]  # per computed tile, in walk order: q_block, k_block, m, l, rescale (one per row), acc (rows × acc_dims)
    # Added later (older traces lack them: read as one head, `head`, with `tiles`): the layer's query heads, and
    # the heads carried, in head order: every head when they fit the budget, else `head` alone; [{head, tiles}],
    # where `head`'s own entry is {head} (its tiles are `tiles`).
    n_heads: int | None = None
    heads: list[dict] | None = None


@event("attention_memory_curve")
class AttentionMemoryCurve(TraceEvent):
    """Modelled memory for one head of one layer as the sequence grows (see tiled_attention.hbm_traffic)."""

    head_dim: int
    bytes_per_value: int
    block_q: int
    block_k: int
    n: list[int]
    naive_score_bytes: list[int]
    tile_bytes: int
    naive_traffic_bytes: list[int]
    tiled_traffic_bytes: list[int]


@event("load_request")
class LoadRequest(TraceEvent):
    """One finished request of the serving-load demo. Times are from the start of the load run."""

    request_id: int
    prompt: str
    n_prompt_tokens: int
    n_generated: int
    arrival_s: float
    start_s: float  # when the engine began its prefill (queueing = start − arrival)
    first_token_s: float
    end_s: float
    ttft_s: float  # first_token − arrival: queueing included, as a user sees it
    tpot_s: float
    itl_s: list[float]
    met_slo: bool
    text: str


@event("load_step")
class LoadStep(TraceEvent):
    """Progress of the load run after one engine forward (one batched step, or one token when sequential)."""

    t_s: float
    n_running: int
    n_waiting: int
    tokens_total: int  # generated so far, all requests
    # The scheduler's queues at this forward, by request id (requests that have not arrived are in none):
    running_ids: list[int]  # in this forward pass (each gained one token)
    waiting_ids: list[int]  # arrived, not finished, not in this pass
    finished_ids: list[int]  # had their last token by the end of this pass (this pass's included)


@event("load_summary")
class LoadSummary(TraceEvent):
    mode: typing.Literal["batched", "sequential"]
    note: str  # how requests were run (and why, when batching was unavailable)
    n_requests: int
    wall_s: float
    output_tokens: int
    throughput_tokens_per_s: float
    requests_per_s: float
    goodput_requests_per_s: float
    ttft_slo_s: float
    tpot_slo_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    itl_p50_s: float
    itl_p90_s: float


# --- speculative decoding ---------------------------------------------------------------------------------

@event("spec_baseline")
class SpecBaseline(TraceEvent):
    """Plain decoding of the same prompt, timed first so the demo can show a running speedup."""

    token_ids: list[int]
    total_time_s: float
    time_per_token_s: float
    prefill_time_s: float


# --- quantization ----------------------------------------------------------------------------------------

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
    dequant_hist_counts: list[int]  # the dequantized weights over the same `hist_edges` (after)


@event("quant_blocks")
class QuantBlocks(TraceEvent):
    """The same matrix block by block (a block = the values sharing one scale: a group of `group` inputs of one
    output row). A sample of every block's largest |w| and error, and a walk through a few blocks in full."""

    format: str
    layer: int
    projection: str
    group: int  # values per block (one output row: its in_features, for the per-channel formats)
    n_blocks: int  # rows × blocks per row
    levels: list[float]  # the format's levels before scaling: a block's grid is levels × its `scale`
    weight_rms: float  # rms of the whole matrix: |w| > outlier_factor × weight_rms is an outlier
    outlier_factor: float
    n_outlier_blocks: int  # blocks whose largest |w| is an outlier (that weight set their scale)
    sample_absmax: list[float]  # a sample of blocks (the walked ones included): the block's largest |w| …
    sample_max_error: list[float]  # … and its largest |w − dequantized w|
    walk: list[dict]  # blocks in order of growing absmax: row, block, start, end, scale, absmax, top_value,
    # max_error, rms_error, outlier, hist_counts (over `bins` equal bins on ±absmax), level_counts (per level)
    bins: int


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
    fp32_decode_tokens_per_s: float  # each from its own decode steps' median time (not the interleaved wall clock)
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


# --- attention (the primer) ---------------------------------------------------------------------------------

@event("attention_weights")
class AttentionWeights(TraceEvent):
    """One head of one layer: how much each token of the prompt attends to each token up to itself."""

    layer: int
    head: int  # the query head shown
    kv_head: int  # the key/value head it reads (grouped-query attention: several query heads share one)
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    token_ids: list[int]
    tokens: list[str]  # the text of each prompt token (the heatmap's labels)
    # weights[i][j]: softmax over keys of query i · key j / √head_dim; 0 for j > i (the causal mask), rows sum to 1
    weights: list[list[float]]
    # every query head of the layer (the picture switches head without a new run): all_heads[h][i] is row i of
    # head h up to the diagonal (i + 1 weights: the masked zeros are not sent), rounded to 4 decimals
    all_heads: list[list[list[float]]]
    # the shown head's walk from Q and K to its output (3 significant digits): per token i, its query q[i], key k[i]
    # (their first 4 dimensions) and value v[i] (the first 12), scores[i][j] = q_i · k_j / √head_dim for j ≤ i
    # (before the softmax, 2 decimals), and output[i] = Σ_j weights[i][j] · v[j] (the first 12), what the head passes on
    walk: dict | None = None


# --- comparisons (every demo that compares two settings) ----------------------------------------------------

@event("comparison_sample")
class ComparisonSample(TraceEvent):
    """One timed, uninterrupted run of one side of a comparison. Repeats alternate which side goes first."""

    repeat: int  # 0, 1, … (the order of the sides flips from one repeat to the next)
    side: str  # the side's label, as in `comparison.sides[].label`
    time_s: float
    counters: dict  # deterministic counts that explain the time (name → number), the same in every repeat


@event("comparison")
class Comparison(TraceEvent):
    """Two settings timed in alternating repeats: median and spread per side, the counters beside them."""

    metric: str  # what `times_s` measure, in words
    repeats: int  # timed runs per side
    spread: typing.Literal["min–max", "IQR"]  # what each side's low_s–high_s is
    sides: list[dict]  # two: {label, times_s, median_s, low_s, high_s, counters}
    claim: str  # the side the lesson says is faster for these settings; "" where it makes no claim
    faster: str  # the side with the lower median
    within_noise: bool  # the two sides' spreads overlap: the clock cannot tell them apart
    other_sequences: int  # most sequences of other runs that shared one forward pass with this run's
    cpu_load_1m: float  # the machine's 1-minute load average when the comparison ended (−1 where unknown)
