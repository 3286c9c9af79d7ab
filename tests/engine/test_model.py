"""Our forward vs transformers on the same GGUF weights, plus the invariants the lessons rely on."""
from __future__ import annotations

import pytest
import torch

from inference_core import GenerationParams
from engine_reference import KVCache
from inference_core.model.kv_cache import NoCache
from inference_core.engine.trace import validate_event

PROMPTS = [
    "The capital of France is",
    "Hello world! 12345 and 3.14159 are numbers.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "<|im_start|>user\nExplain the KV cache in one sentence.<|im_end|>\n<|im_start|>assistant\n",
]


@pytest.mark.model
@pytest.mark.parametrize("text", PROMPTS)
def test_tokenizer_matches_transformers(engine, hf_tokenizer, text):
    assert engine.tokenizer.encode(text) == hf_tokenizer(text, add_special_tokens=False).input_ids
    assert engine.tokenizer.decode(engine.tokenizer.encode(text)) == text


@pytest.mark.model
def test_chat_template_matches_transformers(engine, hf_tokenizer):
    messages = [{"role": "user", "content": "What is a KV cache?"}]
    expected = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert engine.tokenizer.chat_prompt("What is a KV cache?") == expected


@pytest.mark.model
@pytest.mark.parametrize("text", PROMPTS)
def test_logits_match_transformers(engine, hf_model, text):
    ids = engine.tokenizer.encode(text)
    tokens = torch.tensor([ids])
    with torch.inference_mode():
        ref = hf_model(tokens).logits
        ours = engine.model(tokens, torch.arange(len(ids)), NoCache())
    assert ours.shape == ref.shape
    assert (ours - ref).abs().max().item() <= 1e-3


@pytest.mark.model
@pytest.mark.parametrize("text", [PROMPTS[0], PROMPTS[2], PROMPTS[3]])
def test_greedy_32_tokens_identical_to_transformers(engine, hf_model, text):
    ids = engine.tokenizer.encode(text)
    ours = engine.generate_ids(ids, GenerationParams(max_new_tokens=32))  # stops after emitting EOS, like HF
    with torch.inference_mode():
        ref = hf_model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False,
                                pad_token_id=engine.config.eos_token_id)
    assert ours == ref[0, len(ids):].tolist()
    assert len(ours) >= 24


@pytest.mark.model
def test_cache_and_no_cache_generate_the_same_tokens(engine):
    ids = engine.tokenizer.encode(PROMPTS[2])
    cached = engine.generate_ids(ids, GenerationParams(max_new_tokens=16, use_cache=True))
    recomputed = engine.generate_ids(ids, GenerationParams(max_new_tokens=16, use_cache=False))
    assert cached == recomputed


@pytest.mark.model
def test_trace_events_are_valid_and_consistent(engine):
    events = [e.to_dict() for e in engine.generate("Tell me about caches.", GenerationParams(max_new_tokens=6))]
    for e in events:
        validate_event(e)
    started, *steps, finished = events
    assert started["type"] == "run_started" and finished["type"] == "run_finished"
    assert [s["step"] for s in steps] == list(range(len(steps)))
    assert steps[0]["phase"] == "prefill" and all(s["phase"] == "decode" for s in steps[1:])
    per_token = started["kv_bytes_per_token"]
    assert per_token == 46_080  # 2 × 30 layers × 3 KV heads × 64 dims × 4 bytes
    n_prompt = len(started["prompt_token_ids"])
    for s in steps:  # the cache holds every position up to, not including, the token just sampled
        assert s["kv_bytes_total"] == per_token * s["position"]
        assert sum(s["kv_bytes_per_layer"]) == s["kv_bytes_total"]
    assert steps[0]["n_input_tokens"] == n_prompt and all(s["n_input_tokens"] == 1 for s in steps[1:])
    assert finished["token_ids"] == [s["token_id"] for s in steps]


def test_kv_cache_equals_recompute_on_tiny_model(tiny_model):
    cfg = tiny_model.config
    torch.manual_seed(1)
    tokens = torch.randint(0, cfg.vocab_size, (2, 12))
    with torch.inference_mode():
        full = tiny_model(tokens, torch.arange(12), NoCache())
        cache = KVCache.allocate(cfg.n_layers, 2, cfg.n_kv_heads, 16, cfg.head_dim, torch.float32, "cpu")
        first = tiny_model(tokens[:, :7], torch.arange(7), cache)
        chunk = tiny_model(tokens[:, 7:10], torch.arange(7, 10), cache)  # multi-token step with an offset mask
        steps = [tiny_model(tokens[:, i:i + 1], torch.tensor([i]), cache) for i in range(10, 12)]
    stepped = torch.cat([first, chunk, *steps], dim=1)
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=1e-5)
    assert cache.length == 12


def test_kv_cache_truncate_rolls_back(tiny_model):
    cfg = tiny_model.config
    tokens = torch.randint(0, cfg.vocab_size, (1, 10))
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, 16, cfg.head_dim, torch.float32, "cpu")
    with torch.inference_mode():
        tiny_model(tokens[:, :8], torch.arange(8), cache)
        cache.truncate(6)
        again = tiny_model(tokens[:, 6:10], torch.arange(6, 10), cache)
        full = tiny_model(tokens, torch.arange(10), NoCache())
    torch.testing.assert_close(again, full[:, 6:10], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        cache.truncate(11)


def test_cache_overflow_is_a_clear_error(tiny_model):
    cfg = tiny_model.config
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, 4, cfg.head_dim, torch.float32, "cpu")
    with pytest.raises(ValueError, match="KV cache full"):
        tiny_model(torch.zeros((1, 5), dtype=torch.long), torch.arange(5), cache)


def test_gqa_shapes_and_kv_bytes(tiny_model):
    cfg = tiny_model.config
    assert cfg.kv_bytes_per_token(4) == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4
    assert tiny_model.output.weight.data_ptr() == tiny_model.tok_embeddings.weight.data_ptr()
