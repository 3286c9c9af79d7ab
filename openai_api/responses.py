"""The run's events in OpenAI's response shapes: chat.completion(.chunk) and text_completion, streamed as
server-sent events (`data: {json}` frames, then `data: [DONE]`) or as one JSON object."""
from __future__ import annotations

import json
import time

from .params import CHAT, Completion

FINISH = {"eos": "stop", "length": "length"}


class Detokenizer:
    """Token ids → text deltas whose concatenation is the decoded text (special tokens left out, as the CLI's
    text): a token ending inside a UTF-8 character waits for the rest of it."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids, skip_special=True)
        if text.endswith("\ufffd") or not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta

    def rest(self) -> str:
        text = self.tokenizer.decode(self.ids, skip_special=True)
        delta = text[len(self.sent):] if text.startswith(self.sent) else ""
        self.sent = text
        return delta


class StopCut:
    """Cuts the text before the first stop string. A piece that may be the start of one is held back until the
    next piece says whether it is."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.held = ""

    def feed(self, piece: str) -> tuple[str, bool]:
        """(the text that can be sent now, whether a stop string was met)."""
        text, self.held = self.held + piece, ""
        hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if hits:
            return text[:min(hits)], True
        keep = max((n for s in self.stops for n in range(1, len(s)) if text.endswith(s[:n])), default=0)
        if keep:
            text, self.held = text[:-keep], text[-keep:]
        return text, False

    def rest(self) -> str:
        rest, self.held = self.held, ""
        return rest


class Shaper:
    """One response's ids, times and shapes."""

    def __init__(self, completion: Completion, run_id: str, fingerprint: str) -> None:
        self.completion = completion
        self.chat = completion.kind == CHAT
        self.id = ("chatcmpl-" if self.chat else "cmpl-") + run_id.replace("-", "")
        self.created = int(time.time())
        self.fingerprint = f"fp_{fingerprint}"
        self.n_generated = 0

    def _envelope(self, object_name: str, choices: list) -> dict:
        return {"id": self.id, "object": object_name, "created": self.created, "model": self.completion.model,
                "system_fingerprint": self.fingerprint, "choices": choices}

    def usage(self) -> dict:
        prompt = len(self.completion.prompt_ids)
        return {"prompt_tokens": prompt, "completion_tokens": self.n_generated,
                "total_tokens": prompt + self.n_generated}

    def chunk(self, text: str | None, finish_reason: str | None = None, *, role: bool = False) -> dict:
        if self.chat:
            delta = {"role": "assistant", "content": ""} if role else ({} if text is None else {"content": text})
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return self._envelope("chat.completion.chunk", [choice])
        return self._envelope("text_completion", [{"index": 0, "text": text or "", "logprobs": None,
                                                    "finish_reason": finish_reason}])

    def usage_chunk(self) -> dict:
        body = self._envelope("chat.completion.chunk" if self.chat else "text_completion", [])
        body["usage"] = self.usage()
        return body

    def whole(self, text: str, finish_reason: str) -> dict:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                      "logprobs": None, "finish_reason": finish_reason}
            body = self._envelope("chat.completion", [choice])
        else:
            body = self._envelope("text_completion", [{"index": 0, "text": text, "logprobs": None,
                                                       "finish_reason": finish_reason}])
        body["usage"] = self.usage()
        return body


def sse(data: dict | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data, separators=(',', ':'))}\n\n".encode()


KEEP_ALIVE = b": waiting\n\n"  # an SSE comment: clients skip it, proxies see the connection is alive
