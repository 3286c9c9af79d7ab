"""KV-cache bytes from a model's config, grouped-query attention included (the trap: counting every query head)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "kv_cache_bytes"

PROMPT = """\
During decoding every layer keeps the **keys and values** of every past token, so that the next token's attention
does not recompute them. Write `kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_value=2)`: how many bytes
that cache holds for `batch_size` sequences of `seq_len` tokens each.

`config` uses the Hugging Face names:

* `num_hidden_layers`, `num_attention_heads`, `hidden_size`;
* `num_key_value_heads`: how many K/V heads there are. With **grouped-query attention** (GQA) several query heads
  share one K/V head, so this is smaller than `num_attention_heads` (Llama 3 8B: 32 query heads, 8 K/V heads).
  Missing or `None`: the model has one K/V head per query head;
* `head_dim`: missing or `None` means `hidden_size // num_attention_heads`.

Both K **and** V are stored. `bytes_per_value` is 2 for fp16/bf16, 4 for fp32, 1 for an int8 cache.
Llama 3 8B caches 32 layers × 8 K/V heads × 128 dims × 2 (K and V) × 2 bytes = 131,072 bytes (128 KiB) per token.
"""

STARTER = '''\
def kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_value=2):
    """Bytes of keys and values cached for `batch_size` sequences of `seq_len` tokens."""
    layers = config["num_hidden_layers"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    # What many course pages write. Is every attention head cached? Is only K cached?
    per_token = layers * config["num_attention_heads"] * head_dim * bytes_per_value
    return per_token * seq_len * batch_size
'''

REFERENCE = '''\
def kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_value=2):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    per_token = 2 * config["num_hidden_layers"] * kv_heads * head_dim * bytes_per_value
    return per_token * seq_len * batch_size
'''

LLAMA3_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
SMOLLM2_135M = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
LLAMA2_7B = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}  # no GQA: key absent
GEMMA_2B = {"num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1, "hidden_size": 2048,
            "head_dim": 256}
LLAMA3_70B = {"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192}
QWEN25_05B = {"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_size": 896}
GQA_HINT = "Only the K/V heads are cached: num_key_value_heads, not num_attention_heads (grouped-query attention)."

CASES = (
    Case("Llama 3 8B, one token (GQA: 8 K/V heads)", call(FN, LLAMA3_8B, 1), 131_072, hint=GQA_HINT),
    Case("SmolLM2-135M, 2,048 tokens (3 K/V heads of 64 dims)", call(FN, SMOLLM2_135M, 2048), 47_185_920,
         hint=GQA_HINT),
    Case("Llama 2 7B: no num_key_value_heads, so one per query head", call(FN, LLAMA2_7B, 4096), 2_147_483_648,
         hint="K and V are both cached: a factor of 2."),
    Case("Gemma 2B: head_dim given, not hidden_size // heads", call(FN, GEMMA_2B, 1), 18_432,
         hint="When the config has head_dim, use it."),
    Case("Llama 3 8B, fp32 cache, 4 sequences of 1,000 tokens",
         call(FN, LLAMA3_8B, 1000, batch_size=4, bytes_per_value=4), 1_048_576_000),
    Case("hidden 1", call(FN, LLAMA3_70B, 8192, batch_size=2), 5_368_709_120, hidden=True),
    Case("hidden 2", call(FN, QWEN25_05B, 32768), 402_653_184, hidden=True),
    Case("hidden 3", call(FN, {**SMOLLM2_135M, "head_dim": None}, 10), 230_400, hidden=True),
    Case("hidden 4", call(FN, {"num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": None,
                               "hidden_size": 768}, 1024), 37_748_736, hidden=True),
    Case("hidden 5", call(FN, LLAMA3_8B, 0, batch_size=8), 0, hidden=True),
    Case("hidden 6", call(FN, SMOLLM2_135M, 100, batch_size=3, bytes_per_value=1), 3_456_000, hidden=True),
)

EXERCISE = Exercise(
    id="kv-cache-bytes", title="KV-cache bytes, GQA included", prompt=PROMPT, starter=STARTER, reference=REFERENCE,
    cases=CASES, functions=(FN,),
    summary="How many bytes the keys and values of a model's past tokens take, with grouped-query attention.")
