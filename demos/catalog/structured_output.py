"""The structured-output demo: the real model asked for JSON (or a date), with and without the grammar's token mask.

First one pair of runs in one batch, same prompt, same seed: the unconstrained request samples from the model's
logits as they are, the constrained one from the logits the grammar allows (demos/constrained.py's chooser, the
engine's `Request.chooser`). After each engine step a `mask_step` event per request says how many of the
vocabulary's tokens the grammar allowed, how much of the model's probability they held, the model's own favourite
and the token chosen; for the unconstrained run, whether the grammar would have allowed it (after the first token it
forbids, the run has left the format for good). `structured_text` then gives each run's reply and whether it parses.

Then validity over many runs: `runs` seeds × {unconstrained, constrained}, all in one batched schedule (the
constrained requests' masks computed in the same steps as the plain requests), each reply checked as a program
would read it (`json.loads` and the schema, or the whole text against the pattern): one `validity_run` event per
reply, then `validity_summary` with the two rates.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..constrained import GrammarChooser, check_output
from ..spec import DemoSpec, ParamSpec
from .runner import Models

MAX_PROMPT_TOKENS = 96
MODES = ("unconstrained", "constrained")

SCHEMAS = {
    "scientist": ("json", {
        "type": "object", "additionalProperties": False, "required": ["name", "born", "field"],
        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 32},
                       "born": {"type": "integer", "minimum": 1000, "maximum": 2025},
                       "field": {"type": "string", "enum": ["physics", "chemistry", "biology", "mathematics",
                                                            "computing"]}}}),
    "weather": ("json", {
        "type": "object", "additionalProperties": False, "required": ["city", "sky", "temperature_c"],
        "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 24},
                       "sky": {"type": "string", "enum": ["sunny", "cloudy", "rain", "snow"]},
                       "temperature_c": {"type": "integer", "minimum": -50, "maximum": 60}}}),
    "shopping-list": ("json", {
        "type": "object", "additionalProperties": False, "required": ["items"],
        "properties": {"items": {"type": "array", "minItems": 1, "maxItems": 4,
                                 "items": {"type": "string", "minLength": 1, "maxLength": 16}}}}),
    "date": ("regex", r"(1[0-9]|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
}
PROMPTS = {
    "scientist": "Describe a famous scientist as a JSON object with the keys name, born (the year) and field.",
    "weather": "Give the weather in Paris today as a JSON object with the keys city, sky and temperature_c.",
    "shopping-list": "Write a short shopping list as a JSON object with one key, items, a list of strings.",
    "date": "On what date did people first walk on the Moon? Answer with the date only, as YYYY-MM-DD.",
}


def grammar_source(name: str) -> tuple[str, str]:
    """(kind, source text) of the schema or pattern called `name`."""
    kind, source = SCHEMAS[name]
    return kind, source if kind == "regex" else json.dumps(source)


@event("structured_setup")
class StructuredSetup(TraceEvent):
    """The grammar both runs are held to (the constrained one by its mask), and the vocabulary it masks."""

    schema_name: str
    kind: str  # json | regex
    source: str  # the JSON schema's text, or the pattern
    vocab_size: int
    n_prompt_tokens: int
    temperature: float
    seed: int


@event("mask_step")
class MaskStep(TraceEvent):
    """One engine step of the pair: per run still going (`runs`: mode → its token), what the grammar allowed there
    and what was chosen. A run's entry: index (the token's place in its reply), token_id, text, n_allowed (None: the
    unconstrained run had already left the grammar), allowed_mass (the model's probability on the allowed tokens),
    model_top_text (the model's own favourite), top_allowed, token_allowed, token_probability (before any mask),
    mask_us (the mask's computation on this server, microseconds)."""

    step: int  # the engine step (both runs share them)
    vocab_size: int
    runs: dict


@event("structured_text")
class StructuredText(TraceEvent):
    """A finished run's reply and whether a program could read it."""

    mode: str
    text: str
    n_tokens: int
    finish_reason: str
    valid: bool
    why: str  # empty when valid
    left_grammar_at: int | None  # the first token the grammar forbids (unconstrained; None: never)


@event("validity_run")
class ValidityRun(TraceEvent):
    mode: str
    seed: int
    valid: bool
    why: str
    text: str  # the reply's first 120 characters


@event("validity_summary")
class ValiditySummary(TraceEvent):
    """Valid replies out of `runs` per mode, every run sampled with its own seed at the same temperature."""

    runs: int
    valid: dict  # mode → valid replies
    rate: dict  # mode → valid / runs
    mean_mask_us: float  # mean mask computation per constrained token, microseconds


def _requests(engine, prompt_ids, kind, source, gen, seeds, choosers):
    from inference_core.engine.request import Request

    for seed in seeds:
        for mode in MODES:
            chooser = GrammarChooser(engine, kind, source, len(prompt_ids), enforce=mode == "constrained")
            params = dataclasses.replace(gen, seed=seed)
            choosers[f"{mode}-{seed}"] = chooser
            yield Request(f"{mode}-{seed}", list(prompt_ids), params, generator=params.generator(), chooser=chooser)


def _schedule(engine, n_requests: int, total: int):
    from inference_core.engine.scheduler import SchedulerConfig

    return SchedulerConfig(num_blocks=n_requests * -(-total // 16), max_num_seqs=min(n_requests, 32),
                           max_num_batched_tokens=max(2048, total), kv_dtype=engine.kv_dtype)


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    from inference_core import GenerationParams
    from inference_core.engine.llm_engine import run_batch
    from inference_core.engine.paged_trace import BatchStep, RequestFinished

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    kind, source = grammar_source(params["schema"])
    prompt_ids = engine.encode_prompt(params["prompt"], chat=True)[-MAX_PROMPT_TOKENS:]
    seed, text_of = int(params["seed"]), engine.tokenizer.token_text
    gen = GenerationParams(max_new_tokens=int(params["max_new_tokens"]), temperature=float(params["temperature"]),
                           seed=seed, chat=True)
    total = len(prompt_ids) + gen.max_new_tokens
    yield StructuredSetup(schema_name=params["schema"], kind=kind, source=source, vocab_size=engine.config.vocab_size,
                          n_prompt_tokens=len(prompt_ids), temperature=gen.temperature, seed=seed).to_dict()

    def reply(ev) -> str:
        return engine.tokenizer.decode([t for t in ev.token_ids if t != engine.tokenizer.eos_token_id], True)

    choosers: dict = {}
    pair = list(_requests(engine, prompt_ids, kind, source, gen, [seed], choosers))
    shown = {name: 0 for name in choosers}
    for ev in run_batch(engine, pair, _schedule(engine, 2, total), should_stop=should_stop):
        if isinstance(ev, BatchStep):
            runs = {}
            for name, chooser in choosers.items():
                for rec in chooser.records[shown[name]:]:
                    runs[name.split("-")[0]] = {**{k: v for k, v in rec.items() if k not in ("step", "model_top_id")},
                                                "index": rec["step"], "text": text_of(rec["token_id"]),
                                                "model_top_text": text_of(rec["model_top_id"])}
                shown[name] = len(chooser.records)
            if runs:
                yield MaskStep(step=ev.step, vocab_size=engine.config.vocab_size, runs=runs).to_dict()
        elif isinstance(ev, RequestFinished):
            mode = ev.request_id.split("-")[0]
            valid, why = check_output(kind, source, reply(ev))
            yield StructuredText(mode=mode, text=reply(ev), n_tokens=ev.n_generated, finish_reason=ev.finish_reason,
                                 valid=valid, why=why, left_grammar_at=choosers[ev.request_id].broken_at).to_dict()
    if should_stop is not None and should_stop():
        return
    runs = int(params["runs"])
    choosers = {}
    batch = list(_requests(engine, prompt_ids, kind, source, gen, range(seed, seed + runs), choosers))
    valid = {mode: 0 for mode in MODES}
    for ev in run_batch(engine, batch, _schedule(engine, len(batch), total), should_stop=should_stop):
        if isinstance(ev, RequestFinished):
            mode, run_seed = ev.request_id.split("-")
            ok, why = check_output(kind, source, reply(ev))
            valid[mode] += ok
            yield ValidityRun(mode=mode, seed=int(run_seed), valid=ok, why=why, text=reply(ev)[:120]).to_dict()
    if should_stop is not None and should_stop():
        return
    costs = [r["mask_us"] for name, c in choosers.items() if name.startswith("constrained") for r in c.records]
    yield ValiditySummary(runs=runs, valid=valid, rate={m: round(valid[m] / runs, 4) for m in MODES},
                          mean_mask_us=round(sum(costs) / max(len(costs), 1), 1)).to_dict()


SPEC = DemoSpec(
    name="structured-output",
    title="Structured output: a grammar's mask on every step",
    description=(
        "Ask the real model for JSON that follows a schema (or a date in a fixed pattern), once as it is and once "
        "with the grammar's token mask, and see at each step how much of the vocabulary the grammar allows and "
        "what was chosen; then count valid replies over many seeded runs of each."
    ),
    runner=run,
    module="js/demos/structured-output.js",
    params={
        "schema": ParamSpec("choice", default="scientist", label="Schema", choices=tuple(SCHEMAS)),
        "prompt": ParamSpec("str", default=PROMPTS["scientist"], label="Prompt", max_chars=600,
                            max_tokens=MAX_PROMPT_TOKENS // 2),
        "temperature": ParamSpec("float", default=0.8, label="Temperature (0 = greedy)", min_value=0.0,
                                 max_value=1.5),
        "max_new_tokens": ParamSpec("int", default=40, label="New tokens at most", min_value=8, max_value=64),
        "runs": ParamSpec("int", default=20, label="Runs of each for validity", min_value=1, max_value=100),
        "seed": ParamSpec("int", default=1, label="Seed of the first run", min_value=0, max_value=2**31 - 200),
    },
    presets=tuple({"label": label, "schema": name, "prompt": PROMPTS[name]} for name, label in (
        ("scientist", "A scientist (JSON)"), ("weather", "The weather (JSON, enum)"),
        ("shopping-list", "A list (JSON array)"), ("date", "A date (regex)"))),
    try_next=(
        "Pick “A date (regex)”: the mask allows only digits, then only “-”; count the steps where a single token "
        "is allowed.",
        "Set “Temperature” to 0: both runs are greedy, so the constrained one picks the most likely allowed token "
        "at every step; compare where the two first differ.",
    ),
)
