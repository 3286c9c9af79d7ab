"""The API's endpoints: POST /v1/chat/completions and /v1/completions (streamed or whole), GET /v1/models.
Every request names its key (`Authorization: Bearer il-…`); each completion is one run on the demos' batching
service (relay.py), shaped as OpenAI's responses (responses.py)."""
from __future__ import annotations

from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from inferencelab import client_address

from .errors import BAD_KEY, NO_KEY, ApiError, shown_key
from .keys import key_for
from .params import CHAT, TEXT, parse, tokenizer
from .relay import RunEvents, submit
from .responses import FINISH, KEEP_ALIVE, Detokenizer, Shaper, StopCut, sse

OWNED_BY = "inference-lab"


async def _authenticate(request):
    """The request's API key (with its user), or ApiError 401 in OpenAI's words."""
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not raw:
        raise ApiError(401, NO_KEY)
    key = await sync_to_async(key_for, thread_sensitive=False)(raw)
    if key is None:
        raise ApiError(401, BAD_KEY.format(shown=shown_key(raw)), code="invalid_api_key")
    return key


def _method(request, allowed: str) -> None:
    if request.method != allowed:
        raise ApiError(405, f"{request.method} is not allowed here; use {allowed}.", code="method_not_allowed")


@csrf_exempt
async def chat_completions(request):
    return await _complete(request, CHAT)


@csrf_exempt
async def completions(request):
    return await _complete(request, TEXT)


async def _complete(request, kind: str):
    try:
        _method(request, "POST")
        key = await _authenticate(request)
        completion = await sync_to_async(parse, thread_sensitive=False)(request.body, kind)
        run = await submit(completion, key.user, client_address.for_request(request))
    except ApiError as error:
        return error.response()
    events = RunEvents(run)
    try:
        await events.start()
    except Exception:  # noqa: BLE001 - Redis or the broker is away: nothing was queued
        await events.close()
        return ApiError(503, "The run queue is unavailable; try again shortly.", type="server_error",
                        code="queue_unavailable", retry_after=5).response()
    shaper = Shaper(completion, str(run.id), run.engine_version[:16])
    detokenizer = Detokenizer(await sync_to_async(tokenizer, thread_sensitive=False)())
    if completion.stream:
        response = StreamingHttpResponse(_stream(events, shaper, detokenizer), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
        return response
    return await _whole(events, shaper, detokenizer)


def _failure(end: dict) -> ApiError:
    code = end.get("code") or end.get("status") or "engine_error"
    message = end.get("error") or f"the run ended without finishing ({end.get('status')})"
    status = 503 if code in ("queue_timeout", "worker_lost") else 500
    return ApiError(status, message, type="server_error", code=code)


async def _tokens(events: RunEvents, shaper: Shaper, detokenizer: Detokenizer) -> AsyncIterator[tuple]:
    """("delta", text) per piece of text, ("wait",) when quiet, then ("finish", reason) or ("error", ApiError).
    A stop string ends the text at once (finish "stop"); the run, not ended yet, is cancelled when `events` close."""
    finish, cut = None, StopCut(shaper.completion.stop)
    async for event in events.events():
        kind = event["type"] if event is not None else "wait"
        if kind == "wait":
            yield ("wait",)
        elif kind == "token":
            shaper.n_generated += 1
            text, stopped = cut.feed(detokenizer.add(event["token_id"]))
            if text:
                yield ("delta", text)
            if stopped:
                events.cancel_reason = "stop_sequence"
                yield ("finish", "stop")
                return
        elif kind == "run_finished":
            finish = FINISH.get(event.get("finish_reason"))
        elif kind == "end":
            if finish is None:
                yield ("error", _failure(event))
                return
            text, stopped = cut.feed(detokenizer.rest())
            if text := text if stopped else text + cut.rest():
                yield ("delta", text)
            yield ("finish", "stop" if stopped else finish)
            return


async def _stream(events: RunEvents, shaper: Shaper, detokenizer: Detokenizer) -> AsyncIterator[bytes]:
    try:
        if shaper.chat:
            yield sse(shaper.chunk(None, role=True))
        async for item in _tokens(events, shaper, detokenizer):
            if item[0] == "wait":
                yield KEEP_ALIVE
            elif item[0] == "delta":
                yield sse(shaper.chunk(item[1]))
            elif item[0] == "error":
                yield sse(item[1].body())
                return
            else:
                yield sse(shaper.chunk(None, item[1]))
                if shaper.completion.include_usage:
                    yield sse(shaper.usage_chunk())
                yield sse("[DONE]")
    finally:
        await events.close()


async def _whole(events: RunEvents, shaper: Shaper, detokenizer: Detokenizer) -> JsonResponse:
    pieces: list[str] = []
    try:
        async for item in _tokens(events, shaper, detokenizer):
            if item[0] == "delta":
                pieces.append(item[1])
            elif item[0] == "error":
                return item[1].response()
            elif item[0] == "finish":
                return JsonResponse(shaper.whole("".join(pieces), item[1]))
    finally:
        await events.close()
    return _failure({}).response()


def _model(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": OWNED_BY}


@csrf_exempt
async def models(request, name: str | None = None):
    try:
        _method(request, "GET")
        await _authenticate(request)
        if name is None:
            return JsonResponse({"object": "list", "data": [_model(settings.ENGINE_MODEL)]})
        if name != settings.ENGINE_MODEL:
            raise ApiError(404, f"The model `{name[:100]}` does not exist.", param="model", code="model_not_found")
        return JsonResponse(_model(name))
    except ApiError as error:
        return error.response()


@csrf_exempt
async def not_found(request, rest: str = ""):
    return ApiError(404, f"Unknown API path: /v1/{rest[:100]}. This server offers /v1/chat/completions, "
                         "/v1/completions and /v1/models.", code="unknown_url").response()
