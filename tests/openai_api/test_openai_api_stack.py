"""The OpenAI-compatible API through OpenAI's own client, against the real stack (Daphne, Redis, a Celery worker
running the real engine): the same tokens as our CLI, concurrent streams batched by the worker's service, the
per-person share as 429s, keys as 401s, bad input as 400s, each in OpenAI's error shape."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest
from django.conf import settings

from demos.models import Run, RunEvent
from openai_api.runner import API_DEMO

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(900)]

PROMPT = "What is a KV cache? Answer in one sentence."
TEXT_PROMPT = "The capital of France is"  # a plain continuation (the chat prompt alone is followed by EOS)
MODEL = settings.ENGINE_MODEL


class Reply:
    """A raw HTTP reply: what any client, not only OpenAI's, gets."""

    def __init__(self, status: int, headers, body: bytes):
        self.status_code, self.headers, self.text = status, headers, body.decode()

    def json(self):
        return json.loads(self.text)


def http(method: str, url: str, *, json_body=None, content: bytes | None = None, headers: dict | None = None):
    data = json.dumps(json_body).encode() if json_body is not None else content
    request = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.headers, error.read())


def client(stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=key, max_retries=0, timeout=300)


def cli(prompt: str, max_new_tokens: int, chat: bool) -> dict:
    """`python -m inference_core generate … --json`: greedy (temperature 0 is its default)."""
    argv = [sys.executable, "-m", "inference_core", "generate", "--prompt", prompt, "--max-new-tokens",
            str(max_new_tokens), "--json"] + (["--chat"] if chat else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def streamed(stream) -> tuple[str, str | None, object]:
    """(text, finish_reason, usage) of a chat or text completion stream."""
    text, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text.append((choice.delta.content or "") if hasattr(choice, "delta") else (choice.text or ""))
            finish = choice.finish_reason or finish
    return "".join(text), finish, usage


def test_a_stream_gets_the_cli_tokens_for_the_same_prompt_and_chat_template(api_stack, make_key):
    _, key = make_key("ada")
    api = client(api_stack, key)
    for chat, max_tokens in ((True, 40), (False, 12)):
        expected = cli(PROMPT if chat else TEXT_PROMPT, max_tokens, chat)
        if chat:
            stream = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                                 max_tokens=max_tokens, temperature=0, stream=True,
                                                 stream_options={"include_usage": True})
        else:
            stream = api.completions.create(model=MODEL, prompt=TEXT_PROMPT, max_tokens=max_tokens, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
        text, finish, usage = streamed(stream)
        assert text == expected["text"] and text.strip(), (chat, text, expected)
        assert usage.completion_tokens == len(expected["token_ids"]), (usage, expected)
        assert usage.prompt_tokens == expected["metrics"]["n_prompt_tokens"]
        assert finish == {"eos": "stop", "length": "length"}[expected["finish_reason"]]
    # the same run whole (stream=False) says the same
    whole = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=40,
                                        temperature=0)
    full = cli(PROMPT, 40, True)["text"]
    assert whole.choices[0].message.content == full
    assert whole.object == "chat.completion" and whole.usage.total_tokens == whole.usage.prompt_tokens + \
        whole.usage.completion_tokens
    run = Run.objects.filter(demo=API_DEMO).order_by("-created_at").first()
    assert run.status == Run.Status.DONE and run.owner == f"u:{run.user_id}"  # one person's share, as a demo run

    # a stop string ends the text before it (streamed or whole), and the run is stopped there
    stop = full.split()[3]
    for stream in (True, False):
        reply = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                            max_tokens=40, temperature=0, stop=["\n\n\n", stop], stream=stream)
        text, finish, _ = streamed(reply) if stream else (reply.choices[0].message.content,
                                                          reply.choices[0].finish_reason, None)
        assert (text, finish) == (full[:full.index(stop)], "stop")
    deadline = time.monotonic() + 30
    while (run := Run.objects.filter(demo=API_DEMO).order_by("-created_at").first()).status in Run.ACTIVE:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert run.status == Run.Status.DONE or run.summary["cancel_reason"] == "stop_sequence", run.summary


def test_32_concurrent_streams_share_the_engine_steps(api_stack, make_key):
    # 16 people with 2 streams each: every stream within its person's share (DEMO_MAX_CONCURRENT_RUNS, 2)
    keys = [make_key(f"student{i}")[1] for i in range(16)]
    assert settings.DEMO_MAX_CONCURRENT_RUNS >= 2

    async def one(i: int) -> tuple[str, str | None]:
        api = openai.AsyncOpenAI(base_url=f"{api_stack.url}/v1", api_key=keys[i // 2], max_retries=0, timeout=600)
        stream = await api.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Count from {i} to {i + 5}."}], max_tokens=12,
            temperature=0, stream=True)
        text, finish = [], None
        async for chunk in stream:
            text.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        await api.close()
        return "".join(text), finish

    async def everyone() -> list[tuple[str, str | None]]:
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(32))), 600)

    results = asyncio.run(everyone())
    assert all(text and finish in ("stop", "length") for text, finish in results), results
    runs = Run.objects.filter(demo=API_DEMO, status=Run.Status.DONE)
    assert runs.count() == 32
    sizes = [e["batch_size"] for e in RunEvent.objects.filter(run__in=runs, type="token").values_list("event", flat=True)]
    assert max(sizes) >= 4, sorted(sizes)  # several requests per forward: the worker's service batched them


def test_a_person_past_their_share_gets_a_429_in_openais_shape(api_stack, make_key):
    _, key = make_key("grace")
    api = client(api_stack, key)
    long = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a long story."}], max_tokens=128,
                temperature=0, stream=True)
    held = [api.chat.completions.create(**long) for _ in range(settings.DEMO_MAX_CONCURRENT_RUNS)]
    with pytest.raises(openai.RateLimitError) as refused:
        api.chat.completions.create(**long)
    error = refused.value
    assert error.status_code == 429 and error.code == "rate_limit_exceeded", error.body
    assert "at a time" in error.message and int(error.response.headers["Retry-After"]) >= 1
    for stream in held:  # the client goes away mid-stream: its runs are cancelled, the share comes back
        stream.close()
    deadline = time.monotonic() + 60
    while Run.objects.filter(user__username="grace", status__in=Run.ACTIVE).exists():
        assert time.monotonic() < deadline, list(Run.objects.filter(user__username="grace").values("status"))
        time.sleep(0.5)
    assert set(Run.objects.filter(user__username="grace").values_list("status", flat=True)) == {"cancelled"}
    text, finish, _ = streamed(api.chat.completions.create(**{**long, "max_tokens": 4}))
    assert finish == "length" and text


def test_a_missing_bad_or_revoked_key_is_a_401(api_stack, make_key):
    user, key = make_key("hopper")
    with pytest.raises(openai.AuthenticationError) as bad:
        client(api_stack, "il-not-a-real-key").models.list()
    assert bad.value.code == "invalid_api_key" and "il-not***-key" in bad.value.message
    raw = http("POST", f"{api_stack.url}/v1/chat/completions", json_body={"model": MODEL, "messages": []})
    assert raw.status_code == 401 and raw.headers["Content-Type"] == "application/json"
    assert set(raw.json()["error"]) == {"message", "type", "param", "code"}
    assert "Authorization: Bearer" in raw.json()["error"]["message"]
    assert [m.id for m in client(api_stack, key).models.list()] == [MODEL]
    from openai_api.keys import revoke

    revoke(user, user.api_keys.get().pk)
    with pytest.raises(openai.AuthenticationError):
        client(api_stack, key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert not Run.objects.filter(user=user).exists()


@pytest.mark.parametrize("change, param, code", [
    ({"model": "gpt-4o"}, "model", "model_not_found"),
    ({"max_tokens": 0}, "max_tokens", "invalid_value"),
    ({"max_tokens": 100_000}, "max_tokens", "invalid_value"),
    ({"max_completion_tokens": 100_000}, "max_completion_tokens", "invalid_value"),
    ({"temperature": 3}, "temperature", "invalid_value"),
    ({"messages": [{"role": "user", "content": "word " * 3000}]}, "messages", "context_length_exceeded"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "invalid_value"),
    ({"messages": []}, "messages", "invalid_type"),
    ({"n": 2}, "n", "invalid_value"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_value"),
    ({"stop": ""}, "stop", "invalid_value"),
    ({"tools": [{"type": "function"}]}, "tools", "unsupported_parameter"),
    ({"frobnicate": 1}, "frobnicate", "unknown_parameter"),
])
def test_bad_chat_input_is_an_openai_400(api_stack, make_key, change, param, code):
    _, key = make_key("turing")
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **change}
    response = http("POST", f"{api_stack.url}/v1/chat/completions", json_body=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error"), error
    assert not Run.objects.exists()  # refused before anything was queued


def test_malformed_json_and_bad_prompts_are_400s_through_the_client(api_stack, make_key):
    _, key = make_key("lovelace")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    for body in (b'{"model": "x", "messages": [', b"[1, 2]", b"\xff\xfe", b""):
        response = http("POST", f"{api_stack.url}/v1/chat/completions", content=body, headers=headers)
        assert response.status_code == 400 and "could not parse the JSON" in response.json()["error"]["message"]
    api = client(api_stack, key)
    with pytest.raises(openai.BadRequestError) as too_long:
        api.completions.create(model=MODEL, prompt="token " * 3000, max_tokens=4)
    assert too_long.value.code == "context_length_exceeded" and too_long.value.param == "prompt"
    with pytest.raises(openai.BadRequestError) as unknown:
        api.completions.create(model="smollm2-1.7b", prompt="hi")
    assert unknown.value.code == "model_not_found"
    assert http("GET", f"{api_stack.url}/v1/chat/completions", headers=headers).status_code == 405
    assert http("GET", f"{api_stack.url}/v1/embeddings", headers=headers).json()["error"]["code"] == "unknown_url"
    assert not Run.objects.exists()


def test_the_load_generator_reports_the_serving_metrics(api_stack, make_key, tmp_path):
    """bench/openai_load.py end to end (its figures mean nothing on a test box: only that it measures them)."""
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.openai_load import report, run_load

    keys = tmp_path / "keys.txt"
    keys.write_text("".join(make_key(f"load{i}")[1] + "\n" for i in range(3)))
    args = argparse.Namespace(url=api_stack.url, key=None, keys_file=str(keys), model=MODEL, rate=20.0, uniform=False,
                              requests=6, max_tokens=6, slo_ttft_ms=1e9, slo_tpot_ms=1e9, timeout=300.0, seed=1)
    result = report(*asyncio.run(run_load(args)), args)
    assert result["completed"] == 6 and result["refused_or_failed"] == {}, result
    assert result["within_slo"] == 1.0 and result["goodput_rps"] == result["requests_per_s"] > 0
    assert 0 < result["ttft_ms_p50"] <= result["ttft_ms_p99"] and result["itl_ms_p50"] is not None
    assert result["output_tokens_per_s"] > 0
