"""A request body → what the worker runs: the prompt's token ids (the chat template applied for chat), and the
sampling fields; anything else is a 400 in OpenAI's shape naming the field (errors.ApiError).

The limits are the demos' (DEMO_MAX_PROMPT_TOKENS, DEMO_MAX_NEW_TOKENS): one service, one set of limits."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from django.apps import apps
from django.conf import settings

from .errors import BAD_JSON, ApiError, bad_request

CHAT, TEXT = "chat", "text"
ROLES = ("system", "developer", "user", "assistant")
MAX_MESSAGES = 64
COMMON = {"model", "max_tokens", "temperature", "top_p", "seed", "stream", "stream_options", "n", "user", "stop"}
MAX_STOPS, MAX_STOP_CHARS = 4, 64  # OpenAI's 4 sequences; a stop string is a few words, not a document
FIELDS = {CHAT: COMMON | {"messages", "max_completion_tokens"}, TEXT: COMMON | {"prompt"}}
# OpenAI fields this engine does not implement: accepted at their "off" value, a 400 saying so otherwise.
UNSUPPORTED = {"logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "tools",
               "tool_choice", "functions", "function_call", "response_format", "echo", "suffix", "best_of",
               "parallel_tool_calls", "store", "metadata", "service_tier"}


@dataclass(frozen=True)
class Completion:
    """One validated request."""

    kind: str  # CHAT or TEXT
    model: str
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stream: bool
    include_usage: bool
    stop: tuple[str, ...] = ()  # the text ends before the first of these (the web side cuts it; the run is cancelled)

    def run_params(self) -> dict:
        """What the worker's runner reads (openai_api/runner.py), stored as the Run's params."""
        return {"kind": self.kind, "prompt_token_ids": self.prompt_ids, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}

    @property
    def deterministic(self) -> bool:
        return self.temperature == 0 or self.seed is not None


def tokenizer():
    """The web process's tokenizer for the served model (vocabulary only, no weights)."""
    return apps.get_app_config("demos").tokenizers.get(settings.ENGINE_MODEL)


def chat_text(messages: list[tuple[str, str]], default_system: str) -> str:
    """ChatML, as the model's template writes it: the default system message unless the first message is one,
    then every message, then the assistant's turn. One user message gives exactly the CLI's `--chat` prompt."""
    turns = [] if messages and messages[0][0] in ("system", "developer") else [("system", default_system)]
    turns += messages
    parts = [f"<|im_start|>{'system' if role == 'developer' else role}\n{content}<|im_end|>\n"
             for role, content in turns]
    return "".join(parts) + "<|im_start|>assistant\n"


def _number(body: dict, name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request(f"{name} must be a number.", name, "invalid_type")
    if value < low or (low_open and value == low) or value > high:
        shown = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
        raise bad_request(f"{value!r} is not a valid {name}: it must be in {shown}.", name)
    return float(value)


def _integer(body: dict, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{name} must be an integer.", name, "invalid_type")
    return value


def _max_tokens(body: dict, kind: str) -> int:
    limit = int(settings.DEMO_MAX_NEW_TOKENS)
    name = "max_completion_tokens" if kind == CHAT and body.get("max_completion_tokens") is not None else "max_tokens"
    value = _integer(body, name)
    if value is None:
        return limit
    if value < 1:
        raise bad_request(f"{name} must be at least 1 (got {value}).", name)
    if value > limit:
        raise bad_request(f"{name} is too large: {value}. This server generates at most {limit} completion tokens "
                          f"per request, whereas you provided {value}.", name)
    return value


def _stops(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if (not isinstance(stops, list) or len(stops) > MAX_STOPS
            or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stops)):
        raise bad_request(f"stop must be a string or up to {MAX_STOPS} strings, each 1 to {MAX_STOP_CHARS} "
                          "characters.", "stop")
    return tuple(stops)


def _content(message: dict, i: int) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: text only (this model reads no images or audio)
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"messages[{i}].content: only parts of type 'text' are supported.",
                                  f"messages[{i}].content", "invalid_type")
            texts.append(part["text"])
        return "".join(texts)
    if not isinstance(content, str):
        raise bad_request(f"messages[{i}].content must be a string or a list of text parts.",
                          f"messages[{i}].content", "invalid_type")
    return content


def _messages(body: dict) -> list[tuple[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty array of {role, content} objects.", "messages",
                          "invalid_type" if messages is not None else "missing_required_parameter")
    if len(messages) > MAX_MESSAGES:
        raise bad_request(f"at most {MAX_MESSAGES} messages per request.", "messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise bad_request(f"messages[{i}].role must be one of {', '.join(ROLES)}.", f"messages[{i}].role")
        out.append((message["role"], _content(message, i)))
    return out


def _prompt(body: dict) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list):
        raise bad_request("prompt must be one string: this server runs one completion per request.", "prompt")
    if not isinstance(prompt, str) or not prompt:
        raise bad_request("prompt must be a non-empty string.", "prompt",
                          "invalid_type" if prompt is not None else "missing_required_parameter")
    return prompt


def _fields(body: dict, kind: str) -> None:
    for name, value in body.items():
        if name in FIELDS[kind]:
            continue
        if name in UNSUPPORTED:
            if value in (None, False, 0, [], {}, ""):
                continue
            raise bad_request(f"{name} is not supported by this server.", name, "unsupported_parameter")
        raise bad_request(f"Unrecognized request argument supplied: {name[:64]}", name[:64], "unknown_parameter")


def parse(raw: bytes, kind: str) -> Completion:
    """Validate a request body; raises ApiError (400) naming the first problem."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, BAD_JSON) from None
    if not isinstance(body, dict):
        raise ApiError(400, BAD_JSON)
    _fields(body, kind)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("you must provide a model parameter.", "model", "missing_required_parameter")
    if model != settings.ENGINE_MODEL:
        raise bad_request(f"The model `{model[:100]}` does not exist on this server; GET /v1/models lists the one it "
                          f"serves: {settings.ENGINE_MODEL}.", "model", "model_not_found")
    max_tokens = _max_tokens(body, kind)
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0, low_open=True)
    seed = _integer(body, "seed")
    if seed is not None and not 0 <= seed < 2**63:
        raise bad_request("seed must be in [0, 2^63).", "seed")
    if _integer(body, "n") not in (None, 1):
        raise bad_request("n must be 1: this server returns one choice per request.", "n")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise bad_request("stream must be true or false.", "stream", "invalid_type")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or set(options) - {"include_usage"}
                                or not isinstance(options.get("include_usage", False), bool)):
        raise bad_request("stream_options may only hold include_usage: true or false.", "stream_options")
    if options is not None and not stream:
        raise bad_request("stream_options is only allowed when stream is true.", "stream_options")
    tok = tokenizer()
    text = chat_text(_messages(body), tok.default_system) if kind == CHAT else _prompt(body)
    prompt_ids = tok.encode(text)
    limit = int(settings.DEMO_MAX_PROMPT_TOKENS)
    if len(prompt_ids) > limit:
        where = "messages" if kind == CHAT else "prompt"
        raise bad_request(f"This server's maximum prompt length is {limit} tokens. However, your {where} resulted in "
                          f"{len(prompt_ids)} tokens. Please reduce the length of the {where}.", where,
                          "context_length_exceeded")
    if not prompt_ids:
        raise bad_request("prompt must not be empty.", "prompt")
    return Completion(kind=kind, model=model, prompt_ids=prompt_ids, max_tokens=max_tokens, temperature=temperature,
                      top_p=top_p, seed=seed, stream=stream,
                      include_usage=bool(options and options.get("include_usage")), stop=_stops(body))
