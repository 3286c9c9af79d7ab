"""A stand-in for the demo websocket: it replays runs recorded from the real demo runners in this process (no
Redis, no worker), so a browser test can draw every demo, and step through it, in seconds. The `recorded_runs`
fixture (conftest) records each demo once per session; `stand_in_page` opens a page whose demo socket it answers."""
from __future__ import annotations

import json
import uuid

# Small settings: every chart gets data, quickly.
SMALL_PARAMS = {
    "attention": {},
    "kv-cache": {"prompt": "The capital of France is", "max_new_tokens": 6},
    "attention-variants": {"prompt": "The cat sat on the mat because it was tired.", "window": 4},
    "long-context": {"context": 128},
    "prefill-decode": {"max_new_tokens": 6},
    "flash-attention": {},
    "serving-load": {},
    "speculative": {"max_new_tokens": 12},
    "paged-attention": {"max_new_tokens": 6},
    "batching": {},
    "prefix-caching": {"max_new_tokens": 2},
    "quantization": {"max_new_tokens": 2},
    "sampling": {"prompt": "The capital of France is", "max_new_tokens": 4},
    "token-cost": {"max_batch": 4, "new_tokens": 4},
    "tensor-parallel": {"prompt": "The capital of France is", "max_new_tokens": 3},
    "structured-output": {"runs": 2, "max_new_tokens": 24},
    "serving-metrics": {"rate_per_s": 2.0, "duration_s": 5.0, "max_new_tokens": 3},
    "gguf-inspect": {"layers": 1, "block": 2},
}


def record_runs(models) -> dict[str, list[dict]]:
    """Each demo's trace events from one small run of its real runner (what a worker would publish), with the
    caller's `LoadedModels` (as a worker runs them with its own)."""
    from demos.registry import DEMOS, validate

    assert set(SMALL_PARAMS) == set(DEMOS), "a new demo: give it small params here"
    runs = {}
    for name, params in SMALL_PARAMS.items():
        events = list(DEMOS[name].load_runner()(validate(name, params), models=models))
        runs[name] = json.loads(json.dumps(events))
    return runs


class StandInServer:
    """Answers the page's demo socket (docs/protocol.md): a `start` is accepted and its recorded events
    follow, then `done`; with `refuse` set, a `start` gets that error frame instead."""

    def __init__(self, runs: dict[str, list[dict]]):
        self.runs = runs
        self.refuse: dict | None = None
        self.started: list[str] = []

    def __call__(self, ws) -> None:
        ws.on_message(lambda message: self.answer(ws, json.loads(message)))

    def answer(self, ws, message: dict) -> None:
        if message.get("action") == "ping":
            ws.send(json.dumps({"type": "pong", "t": 0}))
        if message.get("action") != "start":
            return
        demo, ref = message["demo"], message.get("ref")
        self.started.append(demo)
        if self.refuse:
            ws.send(json.dumps({"type": "error", "ref": ref, **self.refuse}))
            return
        run_id = str(uuid.uuid4())
        ws.send(json.dumps({"type": "accepted", "run_id": run_id, "demo": demo, "params": message["params"],
                            "ref": ref}))
        events = self.runs[demo]
        for seq, event in enumerate(events):
            ws.send(json.dumps({"type": "event", "run_id": run_id, "seq": seq, "event": event}))
        summary = {k: v for k, v in events[-1].items() if k != "token_ids"} if events[-1]["type"] == "run_finished" else {}
        ws.send(json.dumps({"type": "done", "run_id": run_id, "status": "done", "summary": summary}))


def stand_in_page(chromium, runs, **context_options):
    context = chromium.new_context(bypass_csp=True, **context_options)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and page.errors.append(msg.text))
    server = StandInServer(runs)
    page.route_web_socket("**/ws/demos/", server)
    return context, page, server


def timeline_state(page, demo: str) -> dict:
    """The step timeline of demo `demo` on the page: {step (0-based), steps, caption}."""
    return page.eval_on_selector(
        f'[data-demo="{demo}"] .ilab-timeline',
        "(t) => ({step: Number(t.dataset.step), steps: Number(t.dataset.steps),"
        " caption: t.querySelector('.ilab-timeline__caption').textContent})")


def scrub_to(page, demo: str, step: int) -> dict:
    """Move demo `demo`'s scrubber to `step` as a student's drag does (an `input` event on the range), wait for
    the picture to follow, and return the timeline's state."""
    selector = f'[data-demo="{demo}"] .ilab-timeline input[type=range]'
    page.eval_on_selector(selector, "(r, v) => { r.value = String(v); r.dispatchEvent(new Event('input', {bubbles: true})); }",
                          step)
    page.wait_for_function(
        "([sel, v]) => document.querySelector(sel).closest('.ilab-timeline').dataset.step === String(v)",
        arg=[selector, step])
    return timeline_state(page, demo)


def store_finished_run(demo: str, events: list[dict], params: dict | None = None):
    """A finished run of `demo` in the database, as a worker leaves one: its share link redraws it (the Run)."""
    from django.utils import timezone

    from demos.models import Run, RunEvent

    now = timezone.now()
    run = Run.objects.create(demo=demo, params=params or {}, status=Run.Status.DONE, owner="s:sharer", device="cpu",
                             dtype="float32", engine_version="0" * 16, started_at=now, finished_at=now,
                             n_events=len(events))
    RunEvent.objects.bulk_create(RunEvent(run=run, seq=i, type=e["type"], event=e) for i, e in enumerate(events))
    return run
