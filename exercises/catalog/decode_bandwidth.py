"""A bandwidth-bound decode step: the bytes it reads (every weight once, each sequence's KV cache with its K/V heads
only: the GQA trap) and the tokens per second that memory bandwidth allows (the batch's tokens, not one)."""
from __future__ import annotations

from .base import Case, Exercise, call

BYTES, SPEED = "step_bytes", "tokens_per_s"

PROMPT = """\
A decode step produces one token for each sequence in the batch, and on a GPU at small batch it is limited by
memory bandwidth: it reads **every weight once** (shared by the whole batch) and **each sequence's KV cache**.

**1.** `step_bytes(config, n_params, bytes_per_param, context_len, batch_size=1, kv_bytes_per_value=2)`: the bytes
one decode step reads: `n_params × bytes_per_param` of weights, plus, for each of the `batch_size` sequences, the
keys and values of its `context_len` cached tokens. `config` uses the Hugging Face names (`num_hidden_layers`,
`num_attention_heads`, `hidden_size`, and `num_key_value_heads`: the K/V heads, fewer than the query heads with
grouped-query attention; missing or `None`, one per query head; head size `hidden_size // num_attention_heads`).

**2.** `tokens_per_s(config, n_params, bytes_per_param, context_len, batch_size, bandwidth, kv_bytes_per_value=2)`:
the most tokens per second a device with `bandwidth` bytes/s can generate when every step must read
`step_bytes(...)`: a step takes `bytes / bandwidth` seconds and gives one token per sequence.

Llama 3 8B (8.03 billion parameters, bf16) at batch 1 on an H100 (3.35 TB/s) reads about 16 GB a step: at most about
200 tokens/s, however fast its arithmetic.
"""

STARTER = '''\
def step_bytes(config, n_params, bytes_per_param, context_len, batch_size=1, kv_bytes_per_value=2):
    """Bytes one decode step reads: the weights once, and every sequence's KV cache."""
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    # K and V for every layer and every attention head?
    kv_per_token = 2 * config["num_hidden_layers"] * config["num_attention_heads"] * head_dim * kv_bytes_per_value
    return n_params * bytes_per_param + kv_per_token * context_len * batch_size


def tokens_per_s(config, n_params, bytes_per_param, context_len, batch_size, bandwidth, kv_bytes_per_value=2):
    """The bandwidth-bound ceiling on generated tokens per second."""
    seconds = step_bytes(config, n_params, bytes_per_param, context_len, batch_size, kv_bytes_per_value) / bandwidth
    return 1 / seconds
'''

REFERENCE = '''\
def step_bytes(config, n_params, bytes_per_param, context_len, batch_size=1, kv_bytes_per_value=2):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config["hidden_size"] // heads
    kv_per_token = 2 * config["num_hidden_layers"] * kv_heads * head_dim * kv_bytes_per_value
    return n_params * bytes_per_param + kv_per_token * context_len * batch_size


def tokens_per_s(config, n_params, bytes_per_param, context_len, batch_size, bandwidth, kv_bytes_per_value=2):
    seconds = step_bytes(config, n_params, bytes_per_param, context_len, batch_size, kv_bytes_per_value) / bandwidth
    return batch_size / seconds
'''

LLAMA3_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
LLAMA2_7B = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}
# SmolLM2-135M, the course's model; its matmul parameters (the output head included, embeddings not) are what the
# engine's decode step reads (inference_core ModelConfig.matmul_params: the tests check the figure against it).
SMOLLM2 = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
SMOLLM2_MATMUL_PARAMS = 134_479_872
H100, A100, LAPTOP = 3.35e12, 2.039e12, 100e9


def expected_bytes(config: dict, n_params: float, bytes_per_param: float, context_len: int, batch_size: int = 1,
                   kv_bytes_per_value: int = 2) -> float:
    kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    return (n_params * bytes_per_param
            + 2 * config["num_hidden_layers"] * kv_heads * head_dim * kv_bytes_per_value * context_len * batch_size)


def _bytes(name: str, *args, **extra) -> Case:
    kw = {k: extra.pop(k) for k in ("batch_size", "kv_bytes_per_value") if k in extra}
    return Case(name, call(BYTES, *args, **kw), expected_bytes(*args, **kw), rel_tol=1e-12, **extra)


def _speed(name: str, config, n_params, bpp, context, batch, bandwidth, kv=2, **extra) -> Case:
    expected = batch * bandwidth / expected_bytes(config, n_params, bpp, context, batch, kv)
    return Case(name, call(SPEED, config, n_params, bpp, context, batch, bandwidth, kv), expected, rel_tol=1e-9,
                **extra)


GQA_HINT = "Only the K/V heads are cached and read: num_key_value_heads, not num_attention_heads."
CASES = (
    _bytes("Llama 3 8B, bf16, 4,096 tokens of context (GQA: 8 K/V heads)", LLAMA3_8B, 8.03e9, 2, 4096,
           hint=GQA_HINT),
    _bytes("SmolLM2-135M in fp32 as our engine runs it, 1,000 tokens, fp32 cache", SMOLLM2, SMOLLM2_MATMUL_PARAMS, 4,
           1000, kv_bytes_per_value=4, hint=GQA_HINT),
    _speed("Llama 3 8B, bf16, batch 1, 512 tokens, on an H100", LLAMA3_8B, 8.03e9, 2, 512, 1, H100),
    _speed("the same at batch 16: the weights are read once for 16 tokens", LLAMA3_8B, 8.03e9, 2, 512, 16, H100,
           hint="A step gives one token to every sequence in the batch."),
    _speed("Llama 2 7B (no GQA) int4 weights, batch 8, 2,048 tokens, on an A100", LLAMA2_7B, 6.74e9, 0.5, 2048, 8,
           A100),
    _bytes("hidden 1", LLAMA3_8B, 8.03e9, 1, 32768, batch_size=4, hidden=True),
    _bytes("hidden 2", LLAMA2_7B, 6.74e9, 2, 100, batch_size=2, hidden=True),
    _bytes("hidden 3", {**SMOLLM2, "num_key_value_heads": None}, SMOLLM2_MATMUL_PARAMS, 2, 64, hidden=True),
    _speed("hidden 4", SMOLLM2, SMOLLM2_MATMUL_PARAMS, 4, 300, 1, LAPTOP, 4, hidden=True),
    _speed("hidden 5", LLAMA3_8B, 8.03e9, 2, 8192, 64, H100, hidden=True),
    _speed("hidden 6", LLAMA3_8B, 8.03e9, 0.5, 0, 1, A100, hidden=True),
)

EXERCISE = Exercise(
    id="decode-bandwidth", title="Bytes per decode step, and the tokens per second they allow", prompt=PROMPT,
    starter=STARTER, reference=REFERENCE, cases=CASES, functions=(BYTES, SPEED),
    summary="What a decode step reads (weights once, each sequence's KV cache with GQA) and the bandwidth ceiling.")
