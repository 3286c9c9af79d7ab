"""Qwen2 support: the Q/K/V-bias path on a tiny random model (always runs), and the Qwen2.5-Coder pack vs
transformers' GGUF loader (skipped unless the optional pack is installed: CI never has it)."""
from __future__ import annotations

import pytest
import torch

from engine_reference import tiny_config
from inference_core.engine.loaded_model import GenerationParams
from inference_core.model.loader import build_model
from engine_reference import KVCache
from inference_core.model.kv_cache import NoCache

DRAFT = "qwen2.5-coder-0.5b-instruct"
INSTALL = "make models-qwen (or: python scripts/install_qwen.py install --which draft)"


# ------------------------------------------------------------------ tiny random Qwen2, no download


def _tiny_pair(qkv_bias: bool = True):
    """transformers' Qwen2ForCausalLM with random weights (biases too) and our model holding the same tensors."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = tiny_config(qkv_bias=qkv_bias, norm_eps=1e-6, rope_theta=1_000_000.0)
    hf_cfg = Qwen2Config(
        vocab_size=cfg.vocab_size, hidden_size=cfg.dim, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads, intermediate_size=cfg.ffn_dim,
        max_position_embeddings=cfg.max_seq_len, rope_theta=cfg.rope_theta, rms_norm_eps=cfg.norm_eps,
        tie_word_embeddings=True, attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf = Qwen2ForCausalLM(hf_cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("norm.weight") else 0.1 * torch.randn_like(p))
    sd = hf.state_dict()
    state = {"tok_embeddings.weight": sd["model.embed_tokens.weight"], "norm.weight": sd["model.norm.weight"]}
    for i in range(cfg.n_layers):
        h, o = f"model.layers.{i}.", f"layers.{i}."
        attn, mlp = h + "self_attn.", h + "mlp."
        state[o + "attention.wqkv.weight"] = torch.cat([sd[attn + f"{x}_proj.weight"] for x in "qkv"])
        if qkv_bias:
            state[o + "attention.wqkv.bias"] = torch.cat([sd[attn + f"{x}_proj.bias"] for x in "qkv"])
        state[o + "attention.wo.weight"] = sd[attn + "o_proj.weight"]
        state[o + "feed_forward.w_gate_up.weight"] = torch.cat([sd[mlp + f"{x}_proj.weight"] for x in ("gate", "up")])
        state[o + "feed_forward.w_down.weight"] = sd[mlp + "down_proj.weight"]
        state[o + "attention_norm.weight"] = sd[h + "input_layernorm.weight"]
        state[o + "ffn_norm.weight"] = sd[h + "post_attention_layernorm.weight"]
    return hf, build_model(cfg, state, torch.device("cpu"))


def test_qkv_bias_is_off_by_default():
    model = build_model(tiny_config(), None, torch.device("cpu"))
    assert model.layers[0].attention.wqkv.bias is None
    assert tiny_config(qkv_bias=True).n_params() - tiny_config().n_params() == 2 * (4 + 2 * 2) * 16


def test_qkv_bias_path_matches_transformers_qwen2():
    hf, ours = _tiny_pair()
    assert ours.layers[0].attention.wqkv.bias is not None
    tokens = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = hf(tokens).logits
        got = ours(tokens, torch.arange(12), NoCache())
        ours.layers[0].attention.wqkv.bias.zero_()  # the biases must matter, or the comparison proves nothing
        unbiased = ours(tokens, torch.arange(12), NoCache())
    assert (got - ref).abs().max().item() <= 1e-4
    assert (unbiased - ref).abs().max().item() > 1e-2


def test_qkv_bias_decode_with_kv_cache_matches_transformers_greedy():
    hf, ours = _tiny_pair()
    prompt = [5, 17, 3, 42, 8]
    cfg = ours.config
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, 32, cfg.head_dim, torch.float32, torch.device("cpu"))
    seq, out = list(prompt), []
    with torch.inference_mode():
        feed, start = seq, 0
        for _ in range(10):
            logits = ours(torch.tensor([feed]), torch.arange(start, start + len(feed)), cache, last_only=True)
            out.append(int(logits[0, -1].argmax()))
            seq.append(out[-1])
            feed, start = seq[-1:], len(seq) - 1
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False, min_new_tokens=10,
                          attention_mask=torch.ones(1, len(prompt), dtype=torch.long), pad_token_id=0)
    assert out == ref[0, len(prompt):].tolist()


def test_qwen2_pre_tokenizer_splits_like_qwen():
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers

    from inference_core.model.tokenizer import build_tokenizer_json

    byte_chars = sorted(pre_tokenizers.ByteLevel.alphabet())  # one token per byte, no merges
    tok = {"tokens": byte_chars + ["<|im_end|>", "<tool_call>"], "merges": [],
           "token_type": [1] * len(byte_chars) + [3, 4], "pre": "qwen2"}
    hf = HFTokenizer.from_str(build_tokenizer_json(tok))
    pieces = [p for p, _ in hf.pre_tokenizer.pre_tokenize_str("It'S 2024\n\nx=1")]
    assert pieces == ["It", "'S", "Ġ", "2", "0", "2", "4", "ĊĊ", "x", "=", "1"]  # digits alone, 'S any case
    ids = hf.encode("a<tool_call>b<|im_end|>", add_special_tokens=False).ids
    assert ids[1] == len(byte_chars) + 1 and ids[-1] == len(byte_chars)
    assert hf.decode(ids, skip_special_tokens=True) == "a<tool_call>b"  # user-defined tokens are not special


def test_missing_pack_names_the_install_command(tmp_path, monkeypatch):
    from inference_core.model.weights import MODELS, WeightsError, gguf_path, is_installed

    monkeypatch.setenv("INFERENCE_LAB_CACHE", str(tmp_path))  # the settings are read from the environment when asked
    for name in (DRAFT, "qwen2.5-coder-1.5b-instruct"):
        assert MODELS[name].package is None and not is_installed(name)
        with pytest.raises(WeightsError, match="make models-qwen"):
            gguf_path(MODELS[name])


# ------------------------------------------------------------------ the real 0.5B draft (optional pack)


@pytest.fixture(scope="module")
def qwen_draft():
    from inference_core.model.weights import MODELS, gguf_path, is_installed

    if not is_installed(DRAFT):
        pytest.skip(f"Qwen2.5-Coder pack not installed: run {INSTALL}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from inference_core import load_engine

    path = gguf_path(MODELS[DRAFT])
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    hf_tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return load_engine(DRAFT, device="cpu"), hf, hf_tok


QWEN_PROMPTS = [
    "def quicksort(arr):\n    ",
    "<|im_start|>user\nRename x to count:\nx = 0\nfor i in range(10):\n    x += i<|im_end|>\n<|im_start|>assistant\n",
]


def test_qwen_tokenizer_and_chat_template_match_transformers(qwen_draft):
    engine, _, hf_tok = qwen_draft
    for text in QWEN_PROMPTS + ["Hello WORLD's 12345 it'S  \n\n\ttabs   <tool_call>x</tool_call> 日本語 🙂"]:
        assert engine.tokenizer.encode(text) == hf_tok.encode(text, add_special_tokens=False)
        assert engine.tokenizer.decode(engine.tokenizer.encode(text)) == text
    messages = [{"role": "user", "content": "Rename x to count."}]
    expected = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert engine.tokenizer.chat_prompt("Rename x to count.") == expected


@pytest.mark.parametrize("text", QWEN_PROMPTS)
def test_qwen_logits_and_greedy_16_match_transformers(qwen_draft, text):
    engine, hf, _ = qwen_draft
    ids = engine.tokenizer.encode(text)
    tokens = torch.tensor([ids])
    with torch.inference_mode():
        ref = hf(tokens).logits
        ours = engine.model(tokens, torch.arange(len(ids)), NoCache())
        greedy_ref = hf.generate(tokens, max_new_tokens=16, do_sample=False, attention_mask=torch.ones_like(tokens),
                                 pad_token_id=engine.config.eos_token_id)[0, len(ids):].tolist()
    assert (ours - ref).abs().max().item() <= 1e-3
    assert engine.generate_ids(ids, GenerationParams(max_new_tokens=16)) == greedy_ref
