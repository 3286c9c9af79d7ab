"""The demo registry: which demos exist, what parameters they take, and how to validate them.

One registry serves the websocket consumer (a `start` message), the standalone demo page and the
course authoring UI (`:::{demo}` directives). `validate(name, params)` returns the cleaned params
(defaults filled in, types checked, limits applied) or raises `DemoParamError(code, message)`.
"""
from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from django.conf import settings


class DemoParamError(ValueError):
    """A demo name or parameter that cannot be accepted. `code` is stable and machine-readable."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


_MISSING = object()


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a demo.

    kind: "str" | "int" | "float" | "bool" | "choice".
    For "str" with `max_tokens`, the text is tokenized (tokenizer only, no weights) and limited.
    `max_value` may be a callable so that limits can follow settings at validation time.
    """

    kind: str
    default: Any = _MISSING
    label: str = ""
    help: str = ""
    min_value: float | None = None
    max_value: float | Callable[[], float] | None = None
    choices: tuple = ()
    max_chars: int | None = None
    max_tokens: Callable[[], int] | int | None = None
    nullable: bool = False

    @property
    def required(self) -> bool:
        return self.default is _MISSING

    def resolved_max(self):
        return self.max_value() if callable(self.max_value) else self.max_value

    def resolved_max_tokens(self):
        return self.max_tokens() if callable(self.max_tokens) else self.max_tokens

    def describe(self) -> dict:
        """A JSON-able description for front ends (form building, authoring help)."""
        d = {"kind": self.kind, "label": self.label, "help": self.help, "required": self.required}
        if not self.required:
            d["default"] = self.default
        if self.min_value is not None:
            d["min"] = self.min_value
        if self.max_value is not None:
            d["max"] = self.resolved_max()
        if self.choices:
            d["choices"] = list(self.choices)
        if self.max_tokens is not None:
            d["max_tokens"] = self.resolved_max_tokens()
        return d


@dataclass(frozen=True)
class DemoSpec:
    name: str
    title: str
    params: dict[str, ParamSpec]
    runner: str  # "module:function", runner(params: dict) -> Iterator[dict]
    description: str = ""
    module: str = ""  # static ES module path under static/js/demos/
    presets: tuple = field(default_factory=tuple)
    # "module:function" checking the cleaned params' structure (raises ValueError with a readable message),
    # so a bad structured value is refused at `start`, before the run is queued, not in the worker.
    check: str = ""
    # Runs whose output is their own timings: a replay of one shows another run's measurements, so the page
    # names when, on which device and with which engine version they were taken (the run's `header`).
    measures_time: bool = False
    # "What to try next": one or two concrete changes to make after a run, shown under the demo once a run is done.
    try_next: tuple = field(default_factory=tuple)

    def load_runner(self) -> Callable[[dict], Iterator[dict]]:
        return _load(self.runner)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "params": {k: p.describe() for k, p in self.params.items()},
            "presets": list(self.presets),
            "measures_time": self.measures_time,
            "try_next": list(self.try_next),
        }


def _load(target: str) -> Callable:
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def _max_new_tokens() -> int:
    return int(settings.DEMO_MAX_NEW_TOKENS)


def _max_prompt_tokens() -> int:
    return int(settings.DEMO_MAX_PROMPT_TOKENS)


DEMOS: dict[str, DemoSpec] = {}

FLASH_DEFAULT_PROMPT = (
    "The quick brown fox jumps over the lazy dog because it was bored of sleeping in the sun all afternoon. "
    "The dog, who had seen this trick many times before, did not even open its eyes, and the fox, a little "
    "disappointed, trotted off into the woods to look for someone more impressed."
)


def register(spec: DemoSpec) -> DemoSpec:
    DEMOS[spec.name] = spec
    return spec


register(
    DemoSpec(
        name="kv-cache",
        title="The KV cache, live",
        description=(
            "Generate text with the real engine and watch the KV cache grow token by token; "
            "run again without the cache to see the per-step cost climb."
        ),
        runner="inference_core.demos.kv_cache:run",
        module="js/demos/kv-cache.js",
        params={
            "prompt": ParamSpec(
                "str",
                default="The capital of France is",
                label="Prompt",
                max_chars=8000,
                max_tokens=_max_prompt_tokens,
            ),
            "max_new_tokens": ParamSpec(
                "int", default=24, label="Max new tokens", min_value=1, max_value=_max_new_tokens
            ),
            "use_cache": ParamSpec("bool", default=True, label="Use the KV cache"),
            "temperature": ParamSpec("float", default=0.0, label="Temperature", min_value=0.0, max_value=2.0),
            "seed": ParamSpec("int", default=None, label="Seed", min_value=0, max_value=2**31 - 1, nullable=True),
        },
        presets=(
            {"label": "Capital of France", "prompt": "The capital of France is"},
            {"label": "Count", "prompt": "One, two, three, four,"},
            {"label": "Story opening", "prompt": "Once upon a time, in a small village by the sea,"},
            {"label": "Recipe", "prompt": "To make a simple tomato sauce, first"},
        ),
        try_next=(
            "Untick “Use the KV cache” and run again: without the cache every step recomputes the whole prefix, so "
            "the step time climbs token by token instead of staying flat.",
            "Raise “Max new tokens” to 96 with the cache on: the step time stays flat while the cache grows by the "
            "same number of bytes for every token.",
        ),
    )
)

# --- Course demos (issue 7): prefill vs decode, FlashAttention, serving load ------------------------
register(
    DemoSpec(
        name="prefill-decode",
        title="Prefill vs decode, timed",
        description=(
            "Time every forward pass of a real generation: one prefill over the whole prompt, then one "
            "decode step per token. Shows TTFT, TPOT, inter-token latency and the achieved FLOP/s and GB/s."
        ),
        runner="inference_core.demos.prefill_decode:run",
        measures_time=True,
        module="js/demos/prefill-decode.js",
        params={
            "prompt": ParamSpec("str", default="The capital of France is", label="Prompt", max_chars=4000,
                                max_tokens=_max_prompt_tokens),
            "repeat_prompt": ParamSpec("int", default=4, label="Repeat the prompt (longer prefill)",
                                       min_value=1, max_value=16),
            "max_new_tokens": ParamSpec("int", default=12, label="New tokens", min_value=2, max_value=48),
        },
        presets=(
            {"label": "Capital of France", "prompt": "The capital of France is"},
            {"label": "Story opening", "prompt": "Once upon a time, in a small village by the sea,"},
        ),
        try_next=(
            "Set “Repeat the prompt” to 16: the prefill gets longer, yet its cost per prompt token falls further, "
            "while every decode step still costs about the same.",
            "Set it to 1: a 5-token prompt shares each weight read among only 5 tokens, so prefill's advantage per "
            "token shrinks.",
        ),
    )
)
register(
    DemoSpec(
        name="flash-attention",
        title="Tiled attention vs the N×N matrix",
        description=(
            "Capture one layer's real queries, keys and values for your prompt, then compute attention twice: "
            "naively with the whole score matrix, and tile by tile with an online softmax."
        ),
        runner="inference_core.demos.flash_attention:run",
        measures_time=True,
        module="js/demos/flash-attention.js",
        params={
            # About 60 tokens: with tiles of 16 that is a 4 × 4 grid of tiles, 6 of them skipped by the causal mask
            # (a prompt shorter than one tile would be a single tile: nothing saved, "Ratio 1.0×").
            "prompt": ParamSpec("str", default=FLASH_DEFAULT_PROMPT, label="Prompt", max_chars=4000,
                                max_tokens=_max_prompt_tokens),
            "layer": ParamSpec("int", default=0, label="Layer", min_value=0, max_value=29),
            "block_size": ParamSpec("int", default=16, label="Tile size (queries and keys)", min_value=4,
                                    max_value=128),
        },
        try_next=(
            "Set the tile size to 64 or more: one tile then covers the whole prompt, the ratio drops to 1.0× and "
            "nothing is skipped; that single tile is the naive N × N matrix again.",
            "Set the tile size to 4: the memory held shrinks further, but the Python loop now runs many more tiny "
            "tiles, so the tiled time on this CPU grows.",
        ),
    )
)
register(
    DemoSpec(
        name="serving-load",
        title="A small load test against our engine",
        description=(
            "Send a handful of requests to the course engine and measure what a serving benchmark measures: "
            "TTFT, TPOT, inter-token latency, throughput and goodput."
        ),
        runner="inference_core.demos.serving_load:run",
        measures_time=True,
        module="js/demos/serving-load.js",
        params={
            "n_requests": ParamSpec("int", default=3, label="Requests", min_value=1, max_value=6),
            "max_new_tokens": ParamSpec("int", default=6, label="Tokens per request", min_value=2, max_value=24),
            "spacing_s": ParamSpec("float", default=0.0, label="Seconds between arrivals", min_value=0.0,
                                   max_value=2.0),
            "mode": ParamSpec("choice", default="batched", label="Scheduling", choices=("batched", "sequential")),
            "ttft_slo_s": ParamSpec("float", default=3.0, label="TTFT target (s)", min_value=0.05, max_value=60.0),
            "tpot_slo_s": ParamSpec("float", default=0.5, label="TPOT target (s)", min_value=0.01, max_value=10.0),
        },
        try_next=(
            "Switch “Scheduling” to sequential with the same settings and compare the runs: the first request is "
            "served as fast, every later one queues behind it, and throughput falls.",
            "Tighten the TPOT target to 0.05 s: goodput falls while throughput stays the same.",
        ),
    )
)


# --- Speculative decoding (issue 5) ------------------------------------------------------------------
register(
    DemoSpec(
        name="speculative",
        title="Speculative decoding, round by round",
        description=(
            "A cheap draft guesses k tokens; the real model checks them all in one forward pass. Watch each "
            "guess get accepted, rejected (and replaced) or topped up with a bonus token, with the measured speedup."
        ),
        runner="inference_core.demos.speculative:run",
        measures_time=True,
        module="js/demos/speculative.js",
        params={
            "prompt": ParamSpec("str", default="Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.",
                                label="Prompt", max_chars=4000, max_tokens=_max_prompt_tokens),
            "chat": ParamSpec("bool", default=True, label="Use the chat template"),
            "draft": ParamSpec("choice", default="ngram", label="Draft",
                               choices=("ngram", "self-early-exit", "self-int8")),
            "exit_layers": ParamSpec("int", default=20, label="Early-exit layers (of 30)", min_value=1, max_value=29),
            "k": ParamSpec("int", default=4, label="Tokens drafted per round (k)", min_value=1, max_value=8),
            "temperature": ParamSpec("float", default=0.0, label="Temperature", min_value=0.0, max_value=1.5),
            "max_new_tokens": ParamSpec("int", default=32, label="New tokens", min_value=4, max_value=64),
            "seed": ParamSpec("int", default=None, label="Seed", min_value=0, max_value=2**31 - 1, nullable=True),
            "baseline": ParamSpec("bool", default=True, label="Time plain decoding too (for the speedup)"),
        },
        presets=(
            {"label": "Copy a sentence (n-gram wins)", "prompt": "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.", "draft": "ngram"},
            {"label": "Edit code", "prompt": "Rename the function add to plus and return only the code:\n\ndef add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b\n", "draft": "ngram"},
            {"label": "Free text (drafts struggle)", "prompt": "Write a haiku about autumn.", "draft": "self-early-exit"},
        ),
        try_next=(
            "Pick the preset “Free text (drafts struggle)”: few guesses are accepted, and speculation becomes slower "
            "than plain decoding; the page works out why from the acceptance rate and the cost of a round.",
            "On the copy preset, set “Guesses per round (k)” to 8: when the guesses are right, each target pass "
            "yields more tokens.",
        ),
    )
)

# --- Paged attention, continuous batching, prefix caching (issue 3) ---------------------------------
register(
    DemoSpec(
        name="paged-attention",
        title="Paged KV cache: blocks and block tables",
        description=(
            "Several requests decode together. Watch the physical KV blocks fill, each request's block table "
            "grow, and compare with reserving a contiguous region for each request's maximum length."
        ),
        runner="inference_core.demos.paged_attention:run",
        check="inference_core.demos.paged_attention:check_params",
        module="js/demos/paged-attention.js",
        params={
            "prompts": ParamSpec("str", default="The capital of France is\nOnce upon a time, in a small village by the sea,\n"
                                 "def fibonacci(n):\nThe three primary colours are", label="Prompts (one per line, up to 6)",
                                 max_chars=1200, max_tokens=200),
            "max_new_tokens": ParamSpec("int", default=12, label="New tokens per request", min_value=2, max_value=24),
            "block_size": ParamSpec("choice", default=8, label="Block size (tokens)", choices=(4, 8, 16)),
            "num_blocks": ParamSpec("int", default=24, label="Physical blocks in the pool", min_value=6, max_value=64),
            "arrival_every": ParamSpec("int", default=2, label="A new request every … steps", min_value=0, max_value=8),
        },
        try_next=(
            "Lower “Physical blocks in the pool” to 8: the pool runs out, a request is preempted, its blocks are "
            "freed and its tokens recomputed later.",
            "Set the block size to 16: fewer, larger blocks leave more of each request's last block empty.",
        ),
    )
)
register(
    DemoSpec(
        name="batching",
        title="Continuous vs static batching",
        description=(
            "The same requests run twice: a static batch that waits for its slowest member, and continuous "
            "batching that admits and retires requests every step."
        ),
        runner="inference_core.demos.batching:run",
        check="inference_core.demos.batching:check_params",
        module="js/demos/batching.js",
        params={
            "workload": ParamSpec("str", default="12@0, 3@0, 4@0, 8@1, 3@2, 6@4", max_chars=200,
                                  label="Requests as tokens@arrival_step, comma-separated (up to 8)"),
            "batch_size": ParamSpec("int", default=3, label="Batch size (sequence slots)", min_value=1, max_value=8),
            "modes": ParamSpec("choice", default="both", label="Modes", choices=("both", "continuous", "static")),
        },
        try_next=(
            "Set the batch size to 1: both modes become the same one-at-a-time schedule and their step counts meet.",
            "Try the workload “24@0, 2@0, 2@0, 2@1, 2@1, 2@2”: one long request holds the static batch while the "
            "short ones wait for it.",
        ),
    )
)
register(
    DemoSpec(
        name="prefix-caching",
        title="Prefix caching: reuse a shared system prompt",
        description=(
            "Questions that share a long system prompt, served without and then with the prefix cache: cached "
            "blocks are reused instead of recomputed, and the time to first token drops."
        ),
        runner="inference_core.demos.prefix_caching:run",
        check="inference_core.demos.prefix_caching:check_params",
        module="js/demos/prefix-caching.js",
        params={
            "questions": ParamSpec("str", default="When are you open on Saturday?\nHow long can I keep a film?\n"
                                   "How much does printing cost?", label="Questions (one per line, up to 4)",
                                   max_chars=600, max_tokens=120),
            "max_new_tokens": ParamSpec("int", default=8, label="New tokens per answer", min_value=1, max_value=16),
            "block_size": ParamSpec("choice", default=16, label="Block size (tokens)", choices=(8, 16, 32)),
        },
        try_next=(
            "Set the block size to 32: only whole blocks are cached, so the part of the shared prompt that ends "
            "in a partly filled block is computed again.",
            "Add a fourth line to “Questions”: it reuses the same cached blocks, so its time to first token drops too.",
        ),
    )
)

# --- Quantization (issue 4) ---------------------------------------------------------------------------
register(
    DemoSpec(
        name="quantization",
        title="Quantization: fewer bits per weight, live",
        description=(
            "One layer's weights under a format's grid with its error, activation outliers for your prompt, and "
            "the same prompt generated in fp32 and in the chosen format, token by token."
        ),
        runner="inference_core.demos.quantization:run",
        measures_time=True,
        module="js/demos/quantization.js",
        params={
            "prompt": ParamSpec("str", default="The capital of France is", label="Prompt", max_chars=2000,
                                max_tokens=64),
            "format": ParamSpec("choice", default="int4-g128", label="Format",
                                choices=("int8", "w8a8", "int4-g32", "int4-g128", "nf4", "fp8", "llm-int8")),
            "layer": ParamSpec("int", default=3, label="Layer", min_value=0, max_value=29),
            "projection": ParamSpec("choice", default="w_down", label="Projection",
                                    choices=("wqkv", "wo", "w_gate_up", "w_down")),
            "max_new_tokens": ParamSpec("int", default=16, label="New tokens", min_value=1, max_value=24),
        },
        try_next=(
            "Switch the format to int8 and run again: the text usually matches fp32 token for token; then try "
            "int4-g32 and nf4 and see where the outputs part.",
            "Set the format to llm-int8: it keeps the activation outliers of the outlier chart in floating point; "
            "compare its text and bytes per token with int8's.",
        ),
    )
)


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str):
    from inference_core import load_tokenizer  # cheap: vocabulary only, no weights

    return load_tokenizer(model)


def count_tokens(text: str) -> int:
    try:
        tok = _tokenizer(settings.ENGINE_MODEL)
    except Exception as exc:  # the engine package is missing or broken: say so, don't guess
        raise DemoParamError("engine_unavailable", f"cannot load the tokenizer: {exc}") from exc
    return len(tok.encode(text))


def get_spec(name: Any) -> DemoSpec:
    if not isinstance(name, str) or name not in DEMOS:
        shown = name if isinstance(name, str) and len(name) <= 64 else type(name).__name__
        raise DemoParamError("unknown_demo", f"unknown demo {shown!r}; known: {', '.join(sorted(DEMOS))}")
    return DEMOS[name]


def _clean_one(key: str, spec: ParamSpec, value: Any) -> Any:
    if value is None and spec.nullable:
        return None
    kind = spec.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise DemoParamError("invalid_param", f"{key} must be true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise DemoParamError("invalid_param", f"{key} must be an integer")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DemoParamError("invalid_param", f"{key} must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise DemoParamError("invalid_param", f"{key} must be finite")
    elif kind == "str":
        if not isinstance(value, str):
            raise DemoParamError("invalid_param", f"{key} must be a string")
        if not value.strip():
            raise DemoParamError("invalid_param", f"{key} must not be empty")
        if spec.max_chars is not None and len(value) > spec.max_chars:
            raise DemoParamError("param_too_long", f"{key} is longer than {spec.max_chars} characters")
        limit = spec.resolved_max_tokens()
        if limit is not None:
            n = count_tokens(value)
            if n > limit:
                raise DemoParamError("param_too_long", f"{key} is {n} tokens; the limit is {limit}")
        return value
    elif kind == "choice":
        if value not in spec.choices:
            raise DemoParamError("invalid_param", f"{key} must be one of {list(spec.choices)}")
        return value
    else:  # pragma: no cover - a programming error in a DemoSpec
        raise DemoParamError("invalid_param", f"{key}: unsupported parameter kind {kind}")
    lo, hi = spec.min_value, spec.resolved_max()
    if lo is not None and value < lo:
        raise DemoParamError("param_out_of_range", f"{key} must be at least {lo}")
    if hi is not None and value > hi:
        raise DemoParamError("param_out_of_range", f"{key} must be at most {hi}")
    return value


def validate(name: Any, params: Any) -> dict:
    """Return cleaned params for demo `name`, or raise DemoParamError."""
    spec = get_spec(name)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise DemoParamError("invalid_params", "params must be a JSON object")
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise DemoParamError("unknown_param", f"unknown parameter(s) for {spec.name}: {', '.join(map(str, unknown))[:200]}")
    cleaned = {}
    for key, pspec in spec.params.items():
        if key in params:
            cleaned[key] = _clean_one(key, pspec, params[key])
        elif pspec.required:
            raise DemoParamError("missing_param", f"{key} is required")
        else:
            cleaned[key] = pspec.default
    if spec.check:
        try:
            _load(spec.check)(cleaned)
        except ValueError as exc:
            raise DemoParamError("invalid_param", str(exc)[:300]) from None
    return cleaned


def is_deterministic(name: str, params: dict) -> bool:
    """Greedy decoding or a fixed seed gives the same tokens for the same inputs. Only such a run may be replayed
    when no worker slot is free (its timings are the stored run's, and the page labels them as such)."""
    get_spec(name)
    if "temperature" in params and params["temperature"] not in (0, 0.0):
        return params.get("seed") is not None
    return True
