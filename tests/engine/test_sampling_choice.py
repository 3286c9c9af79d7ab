"""The sampler's newer knobs and its trace: min-p and the repetition penalty keep what they promise, the
`sampling_step` event describes the distribution the token was really drawn from, and a seed fixes a real run's
tokens (the lesson on choosing the next token stands on each of these)."""
from __future__ import annotations

import pytest
import torch

from inference_core.engine.loaded_model import GenerationParams
from inference_core.engine.trace import validate_event
from inference_core.model.sampling import SamplingParams, choice, penalized, probabilities, sample


def test_min_p_drops_tokens_below_a_share_of_the_most_likely_one():
    probs = torch.tensor([0.5, 0.3, 0.12, 0.05, 0.03])
    p = probabilities(probs.log(), SamplingParams(temperature=1.0, min_p=0.2))  # threshold 0.1
    assert (p > 0).tolist() == [True, True, True, False, False]
    torch.testing.assert_close(p[:3], probs[:3] / probs[:3].sum())


def test_the_repetition_penalty_divides_positive_logits_and_multiplies_negative_ones():
    logits = torch.tensor([2.0, -1.0, 3.0, 0.5])
    out = penalized(logits, SamplingParams(repetition_penalty=2.0), history=[0, 1, 1])
    assert out.tolist() == [1.0, -2.0, 3.0, 0.5]  # seen tokens 0 and 1 (1 counted once), 2 and 3 untouched
    assert penalized(logits, SamplingParams(), history=[0, 1]).tolist() == logits.tolist()  # 1.0 is off


def test_greedy_decoding_honours_the_repetition_penalty():
    logits = torch.tensor([3.0, 2.0, 0.0])
    assert sample(logits, SamplingParams(), history=[0]) == 0
    assert sample(logits, SamplingParams(repetition_penalty=2.0), history=[0]) == 1  # 3 ÷ 2 < 2


@pytest.mark.parametrize("params, expected", [
    (SamplingParams(temperature=1.0, top_k=3, trace_top=8), 3),
    (SamplingParams(temperature=1.0, top_p=0.7, trace_top=8), 3),  # 0.4 + 0.2 < 0.7 ≤ 0.4 + 0.2 + 0.15
    (SamplingParams(temperature=1.0, min_p=0.3, trace_top=8), 3),  # 0.15 ≥ 0.12 > 0.1
    (SamplingParams(temperature=1.0, top_k=4, top_p=0.99, min_p=0.3, trace_top=8), 3),  # the tightest cut wins
    (SamplingParams(trace_top=8), 1),  # greedy keeps the argmax alone
])
def test_the_trace_keeps_a_prefix_of_the_sorted_tokens_as_each_cut_defines(params, expected):
    probs = torch.tensor([0.05, 0.4, 0.1, 0.2, 0.15, 0.06, 0.04])
    rec = choice(probs.log(), params, token=1)
    assert rec["top_ids"] == [1, 3, 4, 2, 5, 0, 6]  # by logit, most likely first
    assert rec["n_kept"] == expected and rec["rank"] == 0
    kept = probabilities(probs.log(), params)
    assert (kept > 0).sum().item() == expected and all(kept[i] > 0 for i in rec["top_ids"][:expected])
    if not params.greedy:
        torch.testing.assert_close(torch.tensor(rec["probs_t"]), probs[rec["top_ids"]], atol=1e-6, rtol=0)
        assert rec["kept_mass"] == pytest.approx(float(probs[rec["top_ids"][:expected]].sum()), abs=1e-5)


def test_a_seed_fixes_a_real_runs_tokens_and_every_token_comes_from_the_kept_set(engine):
    ids = engine.encode_prompt("Once upon a time, in a small village by the sea,", chat=False)

    def run(seed):
        params = GenerationParams(max_new_tokens=8, temperature=1.2, top_p=0.95, min_p=0.02, seed=seed,
                                  repetition_penalty=1.3, trace_top=20, stop_at_eos=False)
        return [validate_event(ev.to_dict()) for ev in engine.generate_events(ids, params)]

    first, again = run(11), run(11)
    tokens = lambda evs: [e["token_id"] for e in evs if e["type"] == "token"]  # noqa: E731
    assert tokens(first) == tokens(again) and len(tokens(first)) == 8
    steps = [e for e in first if e["type"] == "sampling_step"]
    assert [s["token_id"] for s in steps] == tokens(first) and [s["step"] for s in steps] == list(range(8))
    for s in steps:
        assert 0 <= s["rank"] < s["n_kept"]
        assert s["probs_t"] == sorted(s["probs_t"], reverse=True) and s["logits"] == sorted(s["logits"], reverse=True)
        assert len(s["top_ids"]) == len(s["top_texts"]) == 20
    assert tokens(run(12)) != tokens(first)  # another seed, another text (8 draws at temperature 1.2)
