"""Structured output on the real model: the grammar's mask is exact (greedy takes the argmax of the allowed tokens, as a
fresh matcher over the same prefix allows them), it batches beside plain requests without changing them, and the
demo's constrained replies all parse while the unconstrained ones mostly do not.

The issue's goal is 100/100 valid replies with the mask; 100 seeded runs of each kind take minutes on a loaded CPU, so
the suite runs VALIDITY_RUNS of each and `bench/structured_output.py --runs 100` runs the full count.
"""
from __future__ import annotations

import json

import llguidance
import pytest
import torch

from demos.catalog import structured_output as so
from demos.constrained import GrammarChooser, check_output, grammar, ll_tokenizer
from demos.registry import DemoParamError, validate
from inference_core.engine.trace import validate_event

VALIDITY_RUNS = 24
pytestmark = pytest.mark.timeout(600)


class CheckedChooser(GrammarChooser):
    """Also asks a fresh matcher, fed the whole prefix anew, which tokens it allows, and keeps the logits."""

    def __init__(self, engine, kind, source, n_prompt):
        super().__init__(engine, kind, source, n_prompt)
        self.engine, self.kind, self.source, self.seen = engine, kind, source, []

    def __call__(self, logits, params, generator=None, history=()):
        cfg = self.engine.config
        fresh = llguidance.LLMatcher(ll_tokenizer(self.engine.name, cfg.vocab_size, self.engine.tokenizer.eos_token_id),
                                     grammar(self.kind, self.source), log_level=0)
        assert fresh.consume_tokens(list(history)[self.n_prompt:])
        words = torch.frombuffer(bytearray(fresh.compute_bitmask()), dtype=torch.int32)
        allowed = torch.tensor([bool(int(words[t // 32]) >> (t % 32) & 1) for t in range(cfg.vocab_size)])
        token = super().__call__(logits, params, generator, history)
        self.seen.append((logits.float().clone(), allowed, token))
        return token


def test_greedy_under_the_mask_is_the_argmax_of_the_allowed_tokens_and_plain_requests_are_unchanged(loaded_models):
    from inference_core import GenerationParams
    from inference_core.engine.llm_engine import drive
    from inference_core.engine.paged_trace import RequestFinished
    from inference_core.engine.request import Request
    from inference_core.engine.scheduler import SchedulerConfig

    engine = loaded_models.get()
    kind, source = so.grammar_source("scientist")
    prompt = engine.encode_prompt(so.PROMPTS["scientist"], chat=True)
    gen = GenerationParams(max_new_tokens=40, chat=True)
    chooser = CheckedChooser(engine, kind, source, len(prompt))
    plain_alone = engine.generate_ids(prompt, gen)
    _, events = drive(engine, [Request("json", list(prompt), gen, chooser=chooser), Request("plain", list(prompt), gen)],
                      SchedulerConfig(num_blocks=16, max_num_seqs=2))
    finished = {e.request_id: e for e in events if isinstance(e, RequestFinished)}
    assert finished["plain"].token_ids == plain_alone  # batched beside a masked request, a plain one is as alone
    assert finished["json"].finish_reason == "eos" and len(chooser.seen) == finished["json"].n_generated
    for logits, allowed, token in chooser.seen:
        assert allowed[token]
        assert token == int(logits.masked_fill(~allowed, float("-inf")).argmax())
    assert any(not allowed[int(logits.argmax())] for logits, allowed, _ in chooser.seen)  # the mask did decide
    text = engine.tokenizer.decode(finished["json"].token_ids, skip_special=True)
    assert check_output(kind, source, text) == (True, "") and set(json.loads(text)) == {"name", "born", "field"}


def test_the_demo_streams_its_steps_and_every_constrained_reply_is_valid(loaded_models):
    events = list(so.run(validate("structured-output", {"runs": VALIDITY_RUNS, "temperature": 1.0}),
                         models=loaded_models))
    for ev in events:
        validate_event(ev)
    assert events[0]["type"] == "structured_setup" and events[-1]["type"] == "validity_summary"
    steps = [e for e in events if e["type"] == "mask_step"]
    constrained = [e["runs"]["constrained"] for e in steps if "constrained" in e["runs"]]
    assert [r["index"] for r in constrained] == list(range(len(constrained)))
    assert all(r["token_allowed"] and 1 <= r["n_allowed"] <= events[0]["vocab_size"] for r in constrained)
    assert constrained[0]["n_allowed"] == 1  # a JSON object starts with '{' whatever the model wanted
    texts = {e["mode"]: e for e in events if e["type"] == "structured_text"}
    assert texts["constrained"]["valid"] and texts["constrained"]["left_grammar_at"] is None
    runs = [e for e in events if e["type"] == "validity_run"]
    assert len(runs) == 2 * VALIDITY_RUNS
    summary = events[-1]
    assert summary["valid"]["constrained"] == VALIDITY_RUNS == sum(r["valid"] for r in runs if r["mode"] == "constrained")
    assert summary["valid"]["unconstrained"] < VALIDITY_RUNS // 2
    assert summary["valid"]["unconstrained"] == sum(r["valid"] for r in runs if r["mode"] == "unconstrained")


def test_a_regex_allows_one_token_where_the_pattern_forces_it(loaded_models):
    events = list(so.run(validate("structured-output", {"schema": "date", "prompt": so.PROMPTS["date"], "runs": 2,
                                                        "temperature": 0.0}), models=loaded_models))
    constrained = [e["runs"]["constrained"] for e in events if e["type"] == "mask_step" and "constrained" in e["runs"]]
    text = next(e for e in events if e["type"] == "structured_text" and e["mode"] == "constrained")["text"]
    assert check_output("regex", so.SCHEMAS["date"][1], text)[0]
    dash = [r for r in constrained if r["text"] == "-"]
    assert len(dash) == 2 and all(r["n_allowed"] == 1 for r in dash)  # after YYYY and MM only '-' fits


@pytest.mark.parametrize("bad", [{"schema": "no-such-schema"}, {"runs": 0}, {"runs": 101}, {"temperature": -1},
                                 {"max_new_tokens": 1000}, {"schema": ["scientist"]}])
def test_bad_params_are_refused_before_a_run(bad):
    with pytest.raises(DemoParamError):
        validate("structured-output", bad)


def test_the_validity_check_reads_replies_as_a_program_would():
    kind, source = so.grammar_source("weather")
    assert check_output(kind, source, '{"city": "Paris", "sky": "rain", "temperature_c": 12}') == (True, "")
    assert check_output(kind, source, '{"city": "Paris", "sky": "fog", "temperature_c": 12}')[1] == \
        "JSON, but not the schema's"
    assert check_output(kind, source, '{"city": "Paris", "sky": "rain", "temperature_c": 12.5}')[0] is False
    assert check_output(kind, source, '```json\n{"city": "Paris"}\n```')[1].startswith("not JSON")
    kind, source = so.grammar_source("shopping-list")
    assert check_output(kind, source, '{"items": []}')[0] is False  # minItems 1
    assert check_output(kind, source, '{"items": ["milk"], "extra": 1}')[0] is False
