"""The primer's attention demo (demos/catalog/attention.py): the real model's softmax attention weights of one head of
one layer. They are causal, every row sums to 1, they equal a recomputation from the layer's own inputs, and they
are the weights the model really used (weights × values = that head's attention output). The primer's claims about
the default prompt hold on this model."""
from __future__ import annotations

import math

import pytest

from demos.catalog.attention import DEFAULT_PROMPT, MAX_PROMPT_TOKENS, SPEC, head_weights, run
from demos.registry import DemoParamError, validate
from inference_core import validate_event


@pytest.fixture(scope="module")
def engine(loaded_models):
    """The engine the runner uses when given the session's models (the same object)."""
    from inference_core import DEFAULT_MODEL

    return loaded_models.get(DEFAULT_MODEL)


def test_spec_limits_the_prompt_to_32_tokens_and_the_layer_and_head_to_the_model():
    assert SPEC.params["prompt"].describe()["max_tokens"] == MAX_PROMPT_TOKENS == 32
    assert validate("attention", {})["prompt"] == DEFAULT_PROMPT
    with pytest.raises(DemoParamError) as err:
        validate("attention", {"prompt": "word " * 40})
    assert err.value.code == "param_too_long"
    for key, bad in (("layer", 30), ("head", 9), ("head", -1)):
        with pytest.raises(DemoParamError):
            validate("attention", {key: bad})


def test_head_weights_are_a_causal_softmax_with_grouped_heads():
    import torch

    torch.manual_seed(0)
    q, k = torch.randn(1, 9, 5, 64), torch.randn(1, 3, 5, 64)
    w = head_weights(q, k, head=4)  # query head 4 reads key head 1
    scores = q[0, 4] @ k[0, 1].T / 8
    for i in range(5):
        expected = torch.softmax(scores[i, : i + 1], dim=-1)
        assert torch.allclose(w[i, : i + 1], expected, atol=1e-6)
        assert torch.all(w[i, i + 1:] == 0)


def _recompute(engine, ids: list[int], layer: int, head: int):
    """The layer's inputs from a forward pre-hook on its attention module (the normalized residual stream, cos and
    sin), then q, k, v by hand with the layer's own weights; plus the head's real attention output (the input of
    the output projection, from a second hook)."""
    import torch

    from inference_core.model.kv_cache import NoCache
    from inference_core.model.transformer import apply_rope

    attn = engine.model.layers[layer].attention
    seen = {}
    hooks = [attn.register_forward_pre_hook(lambda _m, args: seen.update(x=args[0], cos=args[1], sin=args[2])),
             attn.wo.register_forward_pre_hook(lambda _m, args: seen.update(out=args[0]))]
    try:
        with torch.inference_mode():
            tokens = torch.tensor([ids], device=engine.device)
            engine.model(tokens, torch.arange(len(ids), device=engine.device), NoCache(), n_layers=layer + 1)
    finally:
        for h in hooks:
            h.remove()
    cfg = engine.config
    t, hd, group = len(ids), cfg.head_dim, cfg.n_heads // cfg.n_kv_heads
    with torch.inference_mode():
        heads = attn.wqkv(seen["x"]).view(1, t, cfg.n_heads + 2 * cfg.n_kv_heads, hd).transpose(1, 2)
        q = apply_rope(heads[:, : cfg.n_heads], seen["cos"], seen["sin"])[0, head].double()
        k = apply_rope(heads[:, cfg.n_heads: cfg.n_heads + cfg.n_kv_heads], seen["cos"], seen["sin"])[0, head // group]
        v = heads[0, cfg.n_heads + cfg.n_kv_heads + head // group].double()
        rows = []
        for i in range(t):  # one query at a time, over the keys it may see
            scores = [float(q[i] @ k[j].double()) / math.sqrt(hd) for j in range(i + 1)]
            top = max(scores)
            exp = [math.exp(s - top) for s in scores]
            rows.append([e / sum(exp) for e in exp] + [0.0] * (t - i - 1))
        out = seen["out"][0, :, head * hd:(head + 1) * hd].double()
    return rows, v, out


@pytest.mark.model
@pytest.mark.parametrize("layer,head", [(16, 0), (0, 5), (29, 8)])
def test_weights_are_causal_sum_to_one_and_match_a_recomputation(engine, layer, head, loaded_models):
    import torch

    prompt = "The cat sat on the mat because it was tired."
    events = list(run({"prompt": prompt, "layer": layer, "head": head}, models=loaded_models))
    assert [e["type"] for e in events] == ["attention_weights"]
    ev = validate_event(events[0])
    ids = engine.encode_prompt(prompt, chat=False)
    n = len(ids)
    assert ev["token_ids"] == ids and len(ev["tokens"]) == n and "".join(ev["tokens"]) == prompt
    assert (ev["layer"], ev["head"], ev["kv_head"]) == (layer, head, head // 3)
    assert (ev["n_heads"], ev["n_kv_heads"], ev["head_dim"], ev["n_layers"]) == (9, 3, 64, 30)
    w = ev["weights"]
    assert len(w) == n and all(len(row) == n for row in w)
    for i, row in enumerate(w):
        assert all(x == 0.0 for x in row[i + 1:]), f"row {i} attends to a later token"
        assert all(x >= 0.0 for x in row)
        assert abs(sum(row) - 1.0) < 1e-4, (i, sum(row))
    expected, v, out = _recompute(engine, ids, layer, head)
    for i in range(n):
        assert max(abs(a - b) for a, b in zip(w[i], expected[i])) < 1e-5, i
    # The weights the model really used: weights × values is the head's own attention output (SDPA's).
    mixed = torch.tensor(expected, dtype=torch.float64) @ v
    assert torch.allclose(mixed, out, atol=1e-4), float((mixed - out).abs().max())


@pytest.mark.model
def test_the_primers_claims_hold_for_the_default_prompt(engine, loaded_models):
    """content/primer.md and the spec's try_next describe these heads on the default prompt."""
    def weights(layer, head):
        ev = next(iter(run(validate("attention", {"layer": layer, "head": head}), models=loaded_models)))
        return ev["tokens"], ev["weights"]

    tokens, w = weights(*(SPEC.params[k].default for k in ("layer", "head")))
    assert len(tokens) == 11  # "11 tokens for this model: one per word and one for the full stop"
    argmax = [max(range(i + 1), key=lambda j: w[i][j]) for i in range(len(w))]
    assert argmax[1:] == list(range(len(w) - 1)), argmax  # layer 16, head 0: a previous-token head
    tokens, w = weights(13, 8)
    it, cat = tokens.index(" it"), tokens.index(" cat")
    assert 0.7 <= w[it][cat] <= 0.9 and max(range(it + 1), key=lambda j: w[it][j]) == cat  # "about 80%"
    tokens, w = weights(18, 7)
    assert sum(row[0] >= 0.9 for row in w[1:]) >= len(w) - 2  # an attention sink on the first token


def test_a_stopped_run_emits_nothing(monkeypatch):
    pytest.importorskip("torch")
    calls = []

    class Engine:
        class config:
            n_layers, n_heads, n_kv_heads, head_dim = 30, 9, 3, 64

        def encode_prompt(self, text, chat):
            return [1, 2, 3]

    import torch

    from workers.serving import LoadedModels

    monkeypatch.setattr("demos.catalog.attention.capture_qkv",
                        lambda engine, ids, layer: (calls.append(layer), torch.zeros(1, 9, 3, 64),
                                                    torch.zeros(1, 3, 3, 64), None)[1:])
    assert list(run({}, should_stop=lambda: True, models=LoadedModels(load=lambda name, device: Engine()))) == []
    assert calls == [16]


@pytest.mark.model
def test_every_head_of_the_layer_comes_with_the_run_so_the_picture_can_switch_head(engine, loaded_models):
    """`all_heads[h]` is head h's rows up to the diagonal: what a run asking for head h sends as `weights`."""
    import json

    events = list(run({"prompt": DEFAULT_PROMPT, "layer": 13, "head": 8}, models=loaded_models))
    ev = validate_event(events[0])
    assert len(ev["all_heads"]) == ev["n_heads"] == 9
    for h in (0, 4, 8):
        other = next(iter(run({"prompt": DEFAULT_PROMPT, "layer": 13, "head": h}, models=loaded_models)))["weights"]
        for i, row in enumerate(ev["all_heads"][h]):
            assert len(row) == i + 1
            assert row == pytest.approx(other[i][: i + 1], abs=6e-5)
    longest = next(iter(run({"prompt": " ".join(["word"] * 32), "layer": 0, "head": 0}, models=loaded_models)))
    assert len(longest["tokens"]) == MAX_PROMPT_TOKENS and len(json.dumps(longest)) < 60_000  # still a small event
