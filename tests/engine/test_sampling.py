"""Sampling: each filter keeps exactly what it promises; seeds make runs repeatable."""
from __future__ import annotations

import torch

from inference_core.model.sampling import SamplingParams, probabilities, sample


def test_greedy_is_argmax_and_one_hot():
    logits = torch.tensor([0.1, 3.0, -1.0, 2.9])
    assert sample(logits, SamplingParams()) == 1
    assert probabilities(logits, SamplingParams()).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_temperature_scales_softmax():
    logits = torch.tensor([1.0, 2.0, 3.0])
    p = probabilities(logits, SamplingParams(temperature=2.0))
    torch.testing.assert_close(p, torch.softmax(logits / 2.0, -1))


def test_top_k_keeps_k_largest():
    logits = torch.tensor([1.0, 5.0, 3.0, 4.0, 2.0])
    p = probabilities(logits, SamplingParams(temperature=1.0, top_k=2))
    assert (p > 0).tolist() == [False, True, False, True, False]
    assert abs(p.sum().item() - 1.0) < 1e-6


def test_top_p_keeps_smallest_prefix_reaching_mass():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    p = probabilities(probs.log(), SamplingParams(temperature=1.0, top_p=0.8))
    assert (p > 0).tolist() == [True, True, False, False]
    torch.testing.assert_close(p[:2], torch.tensor([0.625, 0.375]))


def test_seeded_sampling_is_repeatable_and_follows_distribution():
    logits = torch.tensor([0.0, 1.0, 2.0])
    params = SamplingParams(temperature=1.0)
    a = [sample(logits, params, torch.Generator().manual_seed(7)) for _ in range(3)]
    b = [sample(logits, params, torch.Generator().manual_seed(7)) for _ in range(3)]
    assert a == b
    gen = torch.Generator().manual_seed(0)
    draws = torch.tensor([sample(logits, params, gen) for _ in range(4000)])
    freq = torch.bincount(draws, minlength=3).float() / len(draws)
    assert (freq - torch.softmax(logits, -1)).abs().max() < 0.03
