"""`python -m inference_core generate … --json`: the JSON's metrics, --no-cache and --chat (in-process main())."""
from __future__ import annotations

import json

import pytest

from inference_core.cli import main
from inference_core.engine import GenerationParams

PROMPT = "The capital of France is"
N_NEW = 4
KV_BYTES_PER_TOKEN = 46_080  # SmolLM2-135M fp32: 2 × 30 layers × 3 KV heads × 64 dims × 4 bytes


def _generate(capsys, *extra: str) -> dict:
    assert main(["generate", "--prompt", PROMPT, "--max-new-tokens", str(N_NEW), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.model
def test_generate_json_metrics_no_cache_and_chat(engine, capsys):
    assert engine.config.kv_bytes_per_token(4) == KV_BYTES_PER_TOKEN
    plain_ids = engine.encode_prompt(PROMPT, chat=False)
    chat_ids = engine.encode_prompt(PROMPT, chat=True)

    cached = _generate(capsys)
    no_cache = _generate(capsys, "--no-cache")
    chat = _generate(capsys, "--chat")

    for out in (cached, no_cache, chat):
        assert set(out) == {"token_ids", "text", "finish_reason", "metrics"}
        m = out["metrics"]
        assert set(m) == {"ttft_s", "tpot_s", "tokens_per_s", "kv_bytes", "n_prompt_tokens"}
        n = len(out["token_ids"])
        assert 1 <= n <= N_NEW and out["finish_reason"] in ("length", "eos")
        assert out["finish_reason"] == "eos" or n == N_NEW
        assert 0 < m["ttft_s"] < 60
        if n > 1:
            assert 0 < m["tpot_s"] < 60 and m["tokens_per_s"] > 0
            assert m["tokens_per_s"] == pytest.approx(1 / m["tpot_s"], rel=1e-6)  # same decode steps timed
        assert out["text"] == engine.tokenizer.decode(out["token_ids"], skip_special=True)

    # the cached run holds K/V for every position but the last sampled token (never fed back)
    n = len(cached["token_ids"])
    assert cached["metrics"]["n_prompt_tokens"] == len(plain_ids)
    assert cached["metrics"]["kv_bytes"] == KV_BYTES_PER_TOKEN * (len(plain_ids) + n - 1)
    # --no-cache keeps no K/V at all (engine.generate_events reports 0), and greedy decodes the same tokens
    assert no_cache["metrics"]["kv_bytes"] == 0
    assert no_cache["metrics"]["n_prompt_tokens"] == len(plain_ids)
    assert no_cache["token_ids"] == cached["token_ids"] == engine.generate_ids(
        plain_ids, GenerationParams(max_new_tokens=N_NEW))
    assert "Paris" in cached["text"]

    # --chat wraps the prompt in the ChatML template: other, longer prompt tokens
    assert chat_ids != plain_ids and len(chat_ids) > len(plain_ids)
    assert chat["metrics"]["n_prompt_tokens"] == len(chat_ids)
    assert chat["metrics"]["kv_bytes"] == KV_BYTES_PER_TOKEN * (len(chat_ids) + len(chat["token_ids"]) - 1)
    assert chat["token_ids"] == engine.generate_ids(chat_ids, GenerationParams(max_new_tokens=N_NEW))

