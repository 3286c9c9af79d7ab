"""The KV budget of an attention variant: shared key/value heads, a sliding window with attention sinks, and MLA's
compressed latent (the trap: counting a window's cache as growing, or MLA's latent as keys and values per head)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "kv_cache_bytes_at"

PROMPT = """\
Write `kv_cache_bytes_at(config, context, bytes_per_value=2)`: the bytes one sequence's cache holds once it has
seen `context` tokens, for these attention variants (Hugging Face names):

* **MHA, MQA, GQA**: `num_hidden_layers`, `num_key_value_heads`, `head_dim`. Every layer keeps a key **and** a
  value of `head_dim` numbers per key/value head per token.
* **Sliding window**: `sliding_window` (missing or `None`: no window). A query sees only the last
  `sliding_window` tokens, so the cache keeps at most that many. `attention_sinks` (missing: 0) more tokens, the
  sequence's first ones, are kept beside the window for good (as StreamingLLM does).
* **MLA** (DeepSeek-V2/V3): when `kv_lora_rank` is in the config, a layer caches one compressed latent of
  `kv_lora_rank` numbers plus one shared RoPE key of `qk_rope_head_dim` numbers per token, whatever the number of
  heads, and no separate values.

Llama 3 8B (32 layers, 8 key/value heads of 128) caches 131,072 bytes a token in bf16.
"""

STARTER = '''\
def kv_cache_bytes_at(config, context, bytes_per_value=2):
    """Bytes of cache one sequence holds after `context` tokens."""
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * bytes_per_value
    return per_token * context
'''

REFERENCE = '''\
def kv_cache_bytes_at(config, context, bytes_per_value=2):
    layers = config["num_hidden_layers"]
    if config.get("kv_lora_rank"):
        per_token = layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * bytes_per_value
    else:
        per_token = 2 * layers * config["num_key_value_heads"] * config["head_dim"] * bytes_per_value
    window = config.get("sliding_window")
    held = context if window is None else min(context, window + config.get("attention_sinks", 0))
    return per_token * held
'''

LLAMA3_8B = {"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128}
MISTRAL_7B = {"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 4096}
DEEPSEEK_V3 = {"num_hidden_layers": 61, "num_key_value_heads": 128, "head_dim": 192, "kv_lora_rank": 512,
               "qk_rope_head_dim": 64}
FALCON_7B = {"num_hidden_layers": 32, "num_key_value_heads": 1, "head_dim": 64}  # MQA
SMOLLM2_SINKS = {"num_hidden_layers": 30, "num_key_value_heads": 3, "head_dim": 64, "sliding_window": 8,
                 "attention_sinks": 4}
WINDOW_HINT = "A sliding window keeps at most sliding_window tokens (plus the sinks): the cache stops growing."
MLA_HINT = "With kv_lora_rank, a layer caches the latent plus the RoPE key per token: no factor of 2, no heads."

CASES = (
    Case("Llama 3 8B, one token (GQA)", call(FN, LLAMA3_8B, 1), 131_072),
    Case("Falcon 7B, 2,048 tokens (MQA: one key/value head)", call(FN, FALCON_7B, 2048), 16_777_216),
    Case("Mistral 7B at 32,768 tokens (window of 4,096)", call(FN, MISTRAL_7B, 32768), 536_870_912, hint=WINDOW_HINT),
    Case("Mistral 7B at 1,000 tokens: still inside the window", call(FN, MISTRAL_7B, 1000), 131_072_000),
    Case("DeepSeek-V3, one token (MLA)", call(FN, DEEPSEEK_V3, 1), 70_272, hint=MLA_HINT),
    Case("SmolLM2-135M in fp32, window 8 + 4 sinks, 25 tokens", call(FN, SMOLLM2_SINKS, 25, bytes_per_value=4),
         552_960, hint=WINDOW_HINT),
    Case("hidden 1", call(FN, DEEPSEEK_V3, 131072), 9_210_691_584, hidden=True),
    Case("hidden 2", call(FN, {**MISTRAL_7B, "sliding_window": None}, 8192), 1_073_741_824, hidden=True),
    Case("hidden 3", call(FN, {**SMOLLM2_SINKS, "attention_sinks": 0}, 100, bytes_per_value=1), 92_160, hidden=True),
    Case("hidden 4", call(FN, LLAMA3_8B, 0), 0, hidden=True),
    Case("hidden 5", call(FN, SMOLLM2_SINKS, 10), 230_400, hidden=True),
)

EXERCISE = Exercise(
    id="kv-budget", title="The KV budget of an attention variant", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="Cache bytes for GQA, MQA, a sliding window with attention sinks, and MLA's latent.")
