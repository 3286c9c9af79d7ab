"""Adaptive speculation: the draft length follows the acceptance (AdaptiveK) or the expected tokens per unit of time
(CostAwareK), speculative/adaptive.py, and the output stays token-identical to plain greedy decoding, alone, sharing a
batch and under preemption."""
from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from inference_core.engine.llm_engine import drive
from inference_core.engine.loaded_model import GenerationParams
from inference_core.engine.scheduler import Request, SchedulerConfig
from inference_core.model.sampling import SamplingParams
from inference_core.speculative.adaptive import AdaptiveK, CostAwareK, RoundCost
from inference_core.speculative.decode import SpecDecoding, SpecParams
from inference_core.speculative.drafts import ModelDraft, NgramDraft, Proposal
from inference_core.speculative.speculate import make_draft, make_policy, run_speculative

from test_speculative import (CODE_PROMPT, PROMPT, VOCAB, as_engine, peaky, plain_greedy,  # noqa: F401 (fixture)
                               random_draft_model, speculative_events)


def trajectory(policy: AdaptiveK, accepted: list[int | None]) -> list[int]:
    """The k of each round when round i accepts accepted[i] of its guesses (None: all of them)."""
    ks = []
    for a in accepted:
        k = policy.next_k()
        ks.append(k)
        policy.update(k, k if a is None else min(a, k))
    return ks


def drafting(policy: AdaptiveK, outcomes: list[int | None], rounds: int = 60) -> list[tuple[int, int]]:
    """(round, k) of the rounds that draft, the n-th of them accepting outcomes[n] (None: all; past the end: 0)."""
    it, out = iter(outcomes), []
    for i in range(rounds):
        if k := policy.next_k():
            out.append((i, k))
        a = next(it, 0) if k else 0
        policy.update(k, k if a is None else min(a, k))
    return out


# ---------------------------------------------------------------- the policy alone

def test_full_acceptance_doubles_k_up_to_the_cap():
    assert trajectory(AdaptiveK(cap=16, k=4), [None] * 5) == [4, 8, 16, 16, 16]
    assert trajectory(AdaptiveK(cap=6, k=4), [None] * 3) == [4, 6, 6]
    assert AdaptiveK(cap=2, k=4).next_k() == 2


def test_a_partial_round_sets_k_to_half_or_the_accepted_run_plus_one():
    assert trajectory(AdaptiveK(cap=16, k=8), [3, None, 2, 5]) == [8, 4, 8, 4]
    assert trajectory(AdaptiveK(cap=16, k=16), [10, 0]) == [16, 11]


def test_rejections_shrink_k_then_pause_with_doubling_probes():
    # k halves; the rate estimate falls under min_rate on the third rejection: 2 plain rounds, a probe, 4, a probe,
    # then 8 (the cap)
    assert drafting(AdaptiveK(cap=16, k=4, pause=2, max_pause=8), [], 30) == [(0, 4), (1, 2), (2, 1), (5, 1), (10, 1),
                                                                              (19, 1), (28, 1)]


def test_an_accepted_probe_resumes_and_halves_the_pause():
    p = AdaptiveK(cap=16, k=4, pause=2)
    assert drafting(p, [0, 0, 0, 0, None, None, None], 13) == [(0, 4), (1, 2), (2, 1), (5, 1), (10, 1), (11, 2), (12, 4)]
    assert p.pause == 2 and p.next_k() == 8  # 8 after two pauses, halved three times, not below 2
    # right about once in five tries: after the one success the pauses keep doubling
    q = AdaptiveK(cap=16, k=4, pause=2)
    assert drafting(q, [0, 0, 0, 0, None]) == [(0, 4), (1, 2), (2, 1), (5, 1), (10, 1), (11, 2), (12, 1), (17, 1), (26, 1),
                                                (43, 1)]
    assert q.pause == 32


def test_a_draft_right_often_drafts_almost_always_and_one_rarely_right_almost_never():
    def share_drafting(alpha: float) -> float:
        rng, p, n = random.Random(0), AdaptiveK(), 0
        for _ in range(400):
            k, a = p.next_k(), 0
            while a < k and rng.random() < alpha:  # each guess accepted with probability alpha
                a += 1
            n += k > 0
            p.update(k, a)
        return n / 400
    assert share_drafting(0.6) > 0.9 and share_drafting(0.9) == 1.0
    assert share_drafting(0.1) < 0.1 and share_drafting(0.2) < 0.1


def test_a_round_without_guesses_only_counts_the_pause_down():
    p = AdaptiveK(cap=16, k=8)
    p.update(0, 0)  # e.g. the n-gram draft found no match
    assert p.next_k() == 8 and p.idle == 0 and p.rate == 1.0


def test_k_stays_within_zero_and_the_cap():
    rng = random.Random(0)
    p = AdaptiveK(cap=7, k=3)
    for _ in range(2000):
        k = p.next_k()
        assert 0 <= k <= 7
        p.update(k, rng.randint(0, k))
    with pytest.raises(ValueError):
        AdaptiveK(cap=0)


# ---------------------------------------------------------------- the cost-aware policy alone

def play(policy: CostAwareK, alpha: float, draft_cost: float, rounds: int = 400, seed: int = 0) -> list[int]:
    """The k of each round when every guess is accepted with probability alpha and the timings say a plain step
    takes 10 ms and a guess `draft_cost` of one (the verify as the policy's own cost model has it)."""
    rng, ks = random.Random(seed), []
    for _ in range(rounds):
        k, a = policy.next_k(), 0
        while a < k and rng.random() < alpha:
            a += 1
        ks.append(k)
        policy.update(k, a, 0.01 * draft_cost * k, 0.01 * policy.costs.verify(k))
    return ks


def test_expected_tokens_is_the_standard_formula_when_all_guesses_are_alike():
    p = CostAwareK(prior=0.7)
    for k in range(6):
        assert p.expected_tokens(k) == pytest.approx((1 - 0.7 ** (k + 1)) / (1 - 0.7))
    assert p.cost(0) == 1.0 and p.cost(2) == pytest.approx(1 + 0.15 + 2 * 0.06)


def test_a_draft_always_right_grows_k_by_doubling_to_the_cap():
    ks = play(CostAwareK(cap=16), 1.0, 0.0, rounds=6)
    assert ks == [4, 8, 16, 16, 16, 16]
    assert all(b <= 2 * a for a, b in zip(ks, ks[1:]))


def test_a_draft_always_wrong_stops_and_probes_at_k1_ever_more_rarely():
    p = CostAwareK(cap=16)
    ks = play(p, 0.0, 0.0, rounds=120)
    drafting = [(i, k) for i, k in enumerate(ks) if k]
    assert drafting[:2] == [(0, 4), (1, 2)] and all(k == 1 for _, k in drafting[2:])  # then probes only
    gaps = [b - a for (a, _), (b, _) in zip(drafting[2:], drafting[3:])]
    assert max(gaps) == gaps[-1] > 2 * gaps[0]  # ever more rarely
    assert p.probe_s <= p.budget * p.elapsed_s  # the probes' excess cost (0.21 of a step each) within 2% of the time


def test_the_same_acceptance_pays_for_a_free_draft_and_not_for_a_costly_one():
    def share(alpha: float, cost: float) -> float:
        return sum(k > 0 for k in play(CostAwareK(), alpha, cost)) / 400
    assert share(0.6, 0.0) > 0.9 and share(0.6, 0.7) < 0.1  # an n-gram lookup vs an early exit at 70% of the layers
    assert share(0.9, 0.25) > 0.9  # a cheap model draft that is usually right keeps drafting
    assert share(0.1, 0.0) < 0.15


def test_the_measured_draft_cost_replaces_the_prior():
    p = CostAwareK(costs=RoundCost(draft=0.0))
    assert p.next_k() == 4 and p.ratio == 0.0
    p.update(4, 2, draft_s=4 * 0.009, verify_s=0.01 * p.costs.verify(4))
    assert p.ratio == pytest.approx(0.9)
    assert p.best() == 0  # half the guesses right no longer pays at 0.9 of a step per guess


def test_a_draft_whose_cost_alone_rules_it_out_starts_with_plain_steps_then_probes():
    p = CostAwareK(costs=RoundCost(draft=0.74))
    ks = play(p, 0.0, 0.74, rounds=150)  # a probe costs 0.74 + 0.21 of a step beyond a plain one: 48 rounds' 2%
    assert ks[:48] == [0] * 48 and ks[48] == 1 and sum(k > 0 for k in ks) <= 3


def test_a_model_drafts_first_probe_also_pays_for_reading_the_prompt():
    p = CostAwareK(costs=RoundCost(draft=0.74))
    p.update(0, 0, None, 0.1, prefill=True)  # the prompt's prefill took 10 plain steps: the draft's would take 7.4
    ks = play(p, 0.0, 0.74, rounds=500)
    assert ks.index(1) == 408  # (0.95 + 7.4) steps within 2% of (10 + n) steps


def test_an_accepted_probe_resumes_drafting():
    p = CostAwareK()
    play(p, 0.0, 0.0, rounds=30)
    while p.next_k() == 0:
        p.update(0, 0)
    p.update(1, 1, 0.0, 0.01 * p.costs.verify(1))
    assert p.next_k() == 2 and p.pause == p.first_pause


def test_cost_aware_k_stays_within_zero_and_the_cap():
    rng = random.Random(1)
    p = CostAwareK(cap=7)
    for _ in range(2000):
        k = p.next_k()
        assert 0 <= k <= 7
        p.update(k, rng.randint(0, k), rng.random() * 0.01 * k, rng.random() * 0.02)
    with pytest.raises(ValueError):
        CostAwareK(cap=0)


def test_the_policy_a_request_gets(peaky):
    engine = as_engine(peaky)
    fixed, accept = SpecParams(k=8), SpecParams(k=8, adaptive=True, policy="acceptance")
    assert make_policy(engine, NgramDraft(), fixed) is None
    assert isinstance(make_policy(engine, NgramDraft(), accept), AdaptiveK)
    cost = SpecParams(k=8, adaptive=True)
    assert make_policy(engine, NgramDraft(), cost).costs.draft == 0.0
    # a draft's prior cost: its share of the weight bytes a forward reads (1 of 2 layers and the head: about half)
    assert make_policy(engine, ModelDraft(peaky, n_layers=1), cost).costs.draft == pytest.approx(0.5, abs=0.05)
    assert make_policy(engine, ModelDraft(peaky), cost).costs.draft == 1.0
    with pytest.raises(ValueError):
        make_policy(engine, NgramDraft(), SpecParams(adaptive=True, policy="fastest"))


# ---------------------------------------------------------------- driving the engine's rounds

@dataclass
class ScriptedDraft:
    """Proposes the plain greedy continuation (right) or the token after it in the vocabulary (wrong)."""

    reference: list[int]
    right: bool
    name: str = "scripted"

    def begin(self, prompt_ids, capacity, sampling, generator) -> None:
        pass

    def propose(self, context_ids, k):
        nxt = self.reference[len(context_ids):len(context_ids) + k]
        return Proposal(nxt if self.right else [(t + 1) % VOCAB for t in nxt], None)

    def rollback(self, length: int) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("right", [True, False])
def test_the_rounds_draft_the_policys_k_and_stay_exact(peaky, right):
    want = plain_greedy(peaky, PROMPT, 40)
    draft = ScriptedDraft(PROMPT + want, right)
    events = speculative_events(peaky, draft, PROMPT, SpecParams(k=16, adaptive=True, policy="acceptance",
                                                                 max_new_tokens=40, stop_at_eos=False))
    lengths = [len(e.drafted) for e in events if e.type == "spec_round"]
    assert events[-1].token_ids == want
    assert lengths[0] == 0  # the first round is the prompt's prefill
    if right:
        assert lengths[:4] == [0, 4, 8, 16] and sum(n + 1 for n in lengths) == 40
    else:
        assert lengths[:12] == [0, 4, 2, 1, 0, 0, 1, 0, 0, 0, 0, 1]


def adaptive_request(rid: str, draft, n: int, prompt=PROMPT, policy=AdaptiveK) -> Request:
    params = SpecParams(k=8, adaptive=True, max_new_tokens=n, stop_at_eos=False)
    return Request(rid, list(prompt), params, spec=SpecDecoding(draft, params.k, policy=policy(cap=params.k)))


@pytest.mark.parametrize("policy", [AdaptiveK, CostAwareK])
def test_adaptive_requests_share_a_batch_with_a_plain_one_token_identical(peaky, policy):
    """n-gram, early-exit and a separate (often wrong) draft model, adaptive, in the same steps as a plain request."""
    engine = as_engine(peaky)
    prompts = {"ngram": [1, 2, 3, 1, 2, 3, 1, 2], "exit": PROMPT, "other": [4, 0, 2, 1], "plain": [2, 4, 1, 0, 3]}
    reqs = [adaptive_request("ngram", NgramDraft(), 30, prompts["ngram"], policy),
            adaptive_request("exit", ModelDraft(peaky, n_layers=1, name="exit1"), 30, policy=policy),
            adaptive_request("other", ModelDraft(random_draft_model(VOCAB, 3, seed=5, eos_token_id=99)), 30,
                             prompts["other"], policy),
            Request("plain", prompts["plain"], SamplingParams(max_new_tokens=30, stop_at_eos=False))]
    sched, events = drive(engine, reqs, SchedulerConfig(block_size=4, num_blocks=96))
    for r in reqs:
        assert r.output_ids == plain_greedy(peaky, prompts[r.request_id], 30), r.request_id
    verifies = [e for e in events if e.type == "batch_step" for e in e.entries if e["phase"] == "verify"]
    assert any(e["n_accepted"] < e["n_drafted"] for e in verifies) and any(e["n_accepted"] > 0 for e in verifies)
    assert sched.allocator.num_used == 0


@pytest.mark.parametrize("policy", [AdaptiveK, CostAwareK])
def test_adaptive_requests_survive_preemption(peaky, policy):
    engine = as_engine(peaky)
    reqs = [adaptive_request(f"s{i}", NgramDraft() if i % 2 else ModelDraft(peaky, n_layers=1, name="exit1"), 24,
                             policy=policy) for i in range(3)]
    sched, events = drive(engine, reqs, SchedulerConfig(block_size=4, num_blocks=12))
    assert any(e.type == "preemption" for e in events)
    want = plain_greedy(peaky, PROMPT, 24)
    assert all(r.output_ids == want for r in reqs) and sched.allocator.num_used == 0


@pytest.mark.model
@pytest.mark.parametrize("policy", ["acceptance", "cost"])
@pytest.mark.parametrize("kind", ["ngram", "self-early-exit:4"])
def test_adaptive_greedy_is_token_identical_on_the_real_model(engine, kind, policy):
    ids = engine.tokenizer.encode(CODE_PROMPT)
    reference = engine.generate_ids(ids, GenerationParams(max_new_tokens=32, stop_at_eos=False))
    out, metrics = run_speculative(engine, ids, make_draft(engine, kind),
                                   SpecParams(k=16, adaptive=True, policy=policy, max_new_tokens=32,
                                              stop_at_eos=False))
    assert out == reference and metrics["target_forwards"] <= 32
