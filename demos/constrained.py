"""Structured output: a grammar's token mask at every step, built by llguidance on the course model's tokenizer.

The engine stays free of the library: a constrained request carries a `GrammarChooser` as its `chooser` (the hook
`Request.chooser`: the runner calls it instead of `sample`, with the same arguments). It brings the grammar's
matcher up to date with the request's tokens, asks it which tokens may come next (a bitmask over the vocabulary),
sets every other logit to -inf and calls the engine's own `sample` on what is left: greedy picks the argmax of the
allowed tokens, and a seeded draw renormalizes over them. Each request of a batch has its own chooser, all called
in the same `step()`. With `enforce=False` the chooser only watches: it samples from the raw logits and records
whether the grammar would have allowed each token (the unconstrained run the demo compares with).

llguidance was chosen over xgrammar and outlines-core (all three install from our mirror): it needs no other
package, compiles a schema lazily (no pass over the whole vocabulary per schema: outlines-core's index build is one)
and its per-step mask was as cheap as xgrammar's (bench/structured_output.py measures the mask against a plain step).
"""
from __future__ import annotations

import json
import re
import time
from functools import lru_cache

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


@lru_cache(maxsize=4)
def ll_tokenizer(model_name: str, vocab_size: int, eos_token_id: int):
    """llguidance's view of the model's tokenizer (its tokenizer.json); about a second to build, so kept."""
    import llguidance

    from inference_core.model.weights import prepared_dir

    text = (prepared_dir(model_name) / "tokenizer.json").read_text()
    return llguidance.LLTokenizer(text, n_vocab=vocab_size, eos_token=eos_token_id)


def grammar(kind: str, source: str) -> str:
    """The llguidance grammar of a JSON schema (`kind` "json", `source` its JSON text) or a regex (`kind` "regex")."""
    import llguidance

    if kind == "json":
        return llguidance.LLMatcher.grammar_from_json_schema(source, defaults=JSON_OPTIONS)
    if kind == "regex":
        return llguidance.LLMatcher.grammar_from_regex(source)
    raise ValueError(f"unknown grammar kind {kind!r}")


class GrammarChooser:
    """A request's chooser: the grammar's mask on the logits, then the engine's `sample` (see the module's doc).
    `records[i]`: step i's numbers (how many tokens were allowed, the probability they held, the token chosen)."""

    def __init__(self, engine, kind: str, source: str, n_prompt: int, enforce: bool = True) -> None:
        import llguidance
        import torch

        cfg = engine.config
        tok = ll_tokenizer(engine.name, cfg.vocab_size, engine.tokenizer.eos_token_id)
        self.matcher = llguidance.LLMatcher(tok, grammar(kind, source), log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"the grammar does not compile: {self.matcher.get_error()}")
        self.vocab_size, self.n_prompt, self.enforce = cfg.vocab_size, n_prompt, enforce
        self.consumed = 0  # output tokens the matcher has seen
        self.broken_at: int | None = None  # the first step whose token the grammar forbids (watching only)
        self.records: list[dict] = []
        self._shifts = torch.arange(32, dtype=torch.int32)

    def allowed(self):
        """Bool [vocab]: the tokens the grammar allows next (llguidance packs them 32 to an int32)."""
        import torch

        words = torch.frombuffer(bytearray(self.matcher.compute_bitmask()), dtype=torch.int32)
        return ((words.unsqueeze(-1) >> self._shifts) & 1).bool().flatten()[:self.vocab_size]

    def catch_up(self, history) -> None:
        """Feed the matcher the output tokens it has not seen (`history`: prompt + output, as the engine passes)."""
        for token in list(history)[self.n_prompt + self.consumed:]:
            self.consumed += 1
            if self.broken_at is None and not self.matcher.consume_token(token):
                self.broken_at = self.consumed - 1

    def __call__(self, logits, params, generator=None, history=()) -> int:
        import torch

        from inference_core.model.sampling import sample

        self.catch_up(history)
        row = logits.float()
        t0 = time.perf_counter()
        allowed = self.allowed().to(row.device) if self.broken_at is None else None  # a GPU's logits: there
        mask_s = time.perf_counter() - t0
        masked = row.masked_fill(~allowed, float("-inf")) if self.enforce and allowed is not None else row
        token = sample(masked, params, generator, history)
        probs, top = torch.softmax(row, -1), int(row.argmax())
        self.records.append({
            "step": len(self.records), "token_id": token, "model_top_id": top,
            "n_allowed": int(allowed.sum()) if allowed is not None else None,
            "allowed_mass": round(float(probs[allowed].sum()), 6) if allowed is not None else None,
            "top_allowed": bool(allowed[top]) if allowed is not None else None,
            "token_allowed": bool(allowed[token]) if allowed is not None else None,
            "token_probability": round(float(probs[token]), 6), "mask_us": round(mask_s * 1e6, 1)})
        return token


def conforms(value, schema: dict) -> bool:
    """Whether `value` satisfies `schema`, for the keywords the demo's schemas use (type, enum, properties, required,
    additionalProperties, minimum/maximum, minLength/maxLength, items, minItems/maxItems)."""
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int if kind == "integer" else (int, float)):
            return False
    elif kind is not None and not isinstance(value, types[kind]):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            return False
    if isinstance(value, str) and not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        return False
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        return all(conforms(item, schema.get("items", {})) for item in value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", ())):
            return False
        if schema.get("additionalProperties") is False and any(key not in props for key in value):
            return False
        return all(conforms(item, props[key]) for key, item in value.items() if key in props)
    return True


def check_output(kind: str, source: str, text: str) -> tuple[bool, str]:
    """(valid, why not): the whole reply, surrounding whitespace aside, parsed as the grammar asks."""
    text = text.strip()
    if kind == "regex":
        return (True, "") if re.fullmatch(source, text) else (False, "does not match the pattern")
    try:
        value = json.loads(text)
    except ValueError as exc:
        return False, f"not JSON ({exc.msg})"
    return (True, "") if conforms(value, json.loads(source)) else (False, "JSON, but not the schema's")
