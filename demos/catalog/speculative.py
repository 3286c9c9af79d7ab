"""The speculative-decoding demo: time plain decoding once, then stream draft → verify → accept rounds; then time
both in alternating repeats (`comparison.py`), target and draft forward passes beside the times."""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec, max_prompt_tokens_limit
from .comparison import Side, compare
from .events import SpecBaseline
from .runner import Models


DRAFT_CHOICES = ("ngram", "self-early-exit", "self-int8")
DEFAULT_PROMPT = "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog."


PLAIN, SPECULATIVE = "plain decoding", "speculative"


def timed_sides(engine, prompt_ids: list[int], draft, spec) -> tuple[Side, Side]:
    """Plain decoding and speculation of the same request, each one uninterrupted run: total time (prefill
    included) and the forward passes that explain it."""
    from inference_core.speculative.speculate import plain_timed, run_speculative

    def plain() -> tuple[float, dict]:
        ids, total, _ = plain_timed(engine, prompt_ids, spec)
        return total, {"target forward passes": len(ids), "draft forward passes": 0, "tokens": len(ids)}

    def speculative() -> tuple[float, dict]:
        ids, m = run_speculative(engine, prompt_ids, draft, spec)
        return m["total_time_s"], {"target forward passes": m["target_forwards"] + 1,  # + the prefill
                                   "draft forward passes": m["draft_forwards"], "tokens": len(ids)}

    return Side(PLAIN, plain), Side(SPECULATIVE, speculative)


def lesson_claim(draft_kind: str, temperature: float) -> Callable[[dict[str, dict]], str]:
    """The lesson: a free draft (n-gram) that halves the target's passes wins; a costly draft (early exit) that
    saves few passes loses. Elsewhere (int8 copies, sampling) it says the result is close: no claim."""
    def claim(counters: dict[str, dict]) -> str:
        plain = counters.get(PLAIN, {}).get("target forward passes", 0)
        spec = counters.get(SPECULATIVE, {}).get("target forward passes", 0)
        if temperature > 0 or not plain or not spec:
            return ""
        if draft_kind == "ngram" and spec <= plain / 2:
            return SPECULATIVE
        if draft_kind.startswith("self-early-exit") and spec >= plain * 2 / 3:
            return PLAIN
        return ""
    return claim


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    """Params: prompt, chat, draft (one of DRAFT_CHOICES), exit_layers, k, temperature, max_new_tokens, seed,
    baseline. Yields run_started, spec_baseline (unless baseline is false), spec_started, spec_round…,
    spec_finished, run_finished, then (with the baseline) the comparison's samples and `comparison`."""
    from inference_core.speculative.decode import SpecParams
    from inference_core.speculative.speculate import make_draft, plain_timed, speculate

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    kind = params["draft"]
    if kind == "self-early-exit":
        kind = f"self-early-exit:{int(params['exit_layers'])}"
    draft = make_draft(engine, kind)
    spec = SpecParams(k=int(params["k"]), max_new_tokens=int(params["max_new_tokens"]),
                      temperature=float(params["temperature"]), seed=params["seed"])
    prompt_ids = engine.encode_prompt(params["prompt"], bool(params["chat"]))
    finished = False
    for event in speculate(engine, prompt_ids, draft, spec, should_stop):
        yield event.to_dict()
        if event.type == "run_started" and params["baseline"]:
            if should_stop is not None and should_stop():
                continue  # speculate() notices too and finishes as cancelled
            # plain decoding of the same request, timed, so the page can show a running speedup
            ids, total, prefill = plain_timed(engine, prompt_ids, spec)
            yield SpecBaseline(token_ids=ids, total_time_s=total, time_per_token_s=total / max(len(ids), 1),
                               prefill_time_s=prefill).to_dict()
        elif event.type == "spec_finished":
            finished = event.finish_reason != "cancelled"
    if finished and params["baseline"]:
        yield from compare(*timed_sides(engine, prompt_ids, draft, spec), metric="time to generate the answer",
                           claim=lesson_claim(kind, spec.temperature), should_stop=should_stop)


SPEC = DemoSpec(
    name="speculative",
    title="Speculative decoding, round by round",
    description=(
        "A cheap draft guesses k tokens; the real model checks them all in one forward pass. Watch each "
        "guess get accepted, rejected (and replaced) or topped up with a bonus token, with the measured speedup."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/speculative.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=4000,
                            max_tokens=max_prompt_tokens_limit),
        "chat": ParamSpec("bool", default=True, label="Use the chat template"),
        "draft": ParamSpec("choice", default="ngram", label="Draft", choices=DRAFT_CHOICES),
        "exit_layers": ParamSpec("int", default=20, label="Early-exit layers (of 30)", min_value=1, max_value=29),
        "k": ParamSpec("int", default=4, label="Tokens drafted per round (k)", min_value=1, max_value=8),
        "temperature": ParamSpec("float", default=0.0, label="Temperature", min_value=0.0, max_value=1.5),
        "max_new_tokens": ParamSpec("int", default=32, label="New tokens", min_value=4, max_value=64),
        "seed": ParamSpec("int", default=None, label="Seed", min_value=0, max_value=2**31 - 1, nullable=True),
        "baseline": ParamSpec("bool", default=True, label="Time plain decoding too (for the speedup)"),
    },
    presets=(
        {"label": "Copy a sentence (n-gram wins)", "prompt": DEFAULT_PROMPT, "draft": "ngram"},
        {"label": "Edit code", "prompt": "Rename the function add to plus and return only the code:\n\ndef add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b\n", "draft": "ngram"},
        {"label": "Free text (drafts struggle)", "prompt": "Write a haiku about autumn.", "draft": "self-early-exit"},
    ),
    try_next=(
        "Pick the preset “Free text (drafts struggle)”: few guesses are accepted, and speculation becomes slower "
        "than plain decoding; the page works out why from the acceptance rate and the cost of a round.",
        "On the copy preset, set “Tokens drafted per round (k)” to 8: when the guesses are right, each target pass "
        "yields more tokens.",
    ),
)
