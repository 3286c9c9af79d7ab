"""The batching service: concurrent callers share forward passes and still get their own exact outputs."""
from __future__ import annotations

import threading

import pytest

from inference_core import GenerationParams
from inference_core.engine.scheduler import SchedulerConfig
from workers.serving import EngineService, LoadedModels
from inference_core.engine.trace import RunFinished, TokenStep, validate_event

PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Once upon a time, a robot",
           "The three primary colors are"]


@pytest.fixture(scope="module")
def service(engine):
    return EngineService(engine, SchedulerConfig(num_blocks=64, max_num_seqs=8, prefix_caching=True))


@pytest.mark.model
def test_concurrent_requests_are_batched_and_token_identical(engine, service):
    params = GenerationParams(max_new_tokens=10)
    results: dict[int, list] = {}

    def client(i: int) -> None:
        results[i] = list(service.generate(PROMPTS[i], params))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(results) == list(range(len(PROMPTS)))
    for i, events in results.items():
        for ev in events:
            validate_event(ev.to_dict())
        steps = [e for e in events if isinstance(e, TokenStep)]
        final = events[-1]
        assert isinstance(final, RunFinished) and final.finish_reason in ("length", "eos")
        expected = engine.generate_ids(engine.tokenizer.encode(PROMPTS[i]), params)
        assert [s.token_id for s in steps] == expected == final.token_ids
        assert [s.step for s in steps] == list(range(len(steps)))
        per_token = engine.config.kv_bytes_per_token(4)
        assert all(s.kv_bytes_total == per_token * s.position for s in steps)
    assert max(s.batch_size for ev in results.values() for s in ev if isinstance(s, TokenStep)) > 1
    assert service.stats.max_batch_size > 1
    assert service.stats.running == 0 and service.stats.blocks_used <= service.stats.blocks_total


@pytest.mark.model
def test_closing_the_stream_aborts_and_frees_blocks(service):
    # long enough (no EOS stop) that, were the abort lost, it would still be running and holding blocks
    # for seconds after the short request below finished
    events = service.generate("Count slowly: one, two, three,", GenerationParams(max_new_tokens=400, stop_at_eos=False))
    for ev in events:
        if isinstance(ev, TokenStep) and ev.step == 2:
            break
    events.close()  # the client went away
    done = list(service.generate("Hi", GenerationParams(max_new_tokens=2)))  # the service keeps serving
    assert isinstance(done[-1], RunFinished)
    stats = wait_until_idle(service)
    assert stats.running == 0 and stats.waiting == 0
    # Every block is back in the pool. With prefix caching on, finished prompts' full blocks stay *cached*
    # but at refcount 0 in the allocator's free queue (evictable), so they do not count as used.
    assert stats.blocks_used == 0


def wait_until_idle(service, timeout_s: float = 3.0):
    """The service thread refreshes its stats just after it hands a step's events to the callers, so a
    caller that has just seen run_finished may read them a moment early: give them a short while."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        s = service.stats
        if s.running == 0 and s.waiting == 0 and s.blocks_used == 0:
            break
        time.sleep(0.01)
    return service.stats


@pytest.mark.model
def test_should_stop_cancels_with_a_final_event(service):
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    params = GenerationParams(max_new_tokens=100, stop_at_eos=False)
    events = list(service.generate("Tell me a long story about the sea.", params, stop))
    assert events[-1].finish_reason == "cancelled"
    assert len([e for e in events if isinstance(e, TokenStep)]) < 100


def test_no_cache_requests_are_refused(tiny_model):
    from inference_core.engine.loaded_model import LoadedModel

    class _Tok:
        def token_text(self, t):
            return str(t)

    eng = LoadedModel("tiny", tiny_model, _Tok(), tiny_model.tok_embeddings.weight.device)
    svc = EngineService(eng, SchedulerConfig(num_blocks=8))
    with pytest.raises(ValueError, match="always uses the KV cache"):
        list(svc.generate_events([1, 2], GenerationParams(use_cache=False)))


@pytest.mark.model
def test_kv_cache_runner_says_when_the_worker_must_hold_the_engine_lock(engine, loaded_models):
    """The worker serialises `next()` on the engine lock only for direct engine runs: a cached run goes
    through the thread-safe batching service, and holding the lock while it waits for its token would
    let concurrent students reach the service one at a time (measured: mean batch 2.2 instead of 15)."""
    from demos.catalog.kv_cache import run as kv_cache_run

    cached = kv_cache_run({"prompt": "Hello", "max_new_tokens": 2, "use_cache": True}, models=loaded_models)
    direct = kv_cache_run({"prompt": "Hello", "max_new_tokens": 2, "use_cache": False}, models=loaded_models)
    try:
        assert cached.needs_engine_lock is False and direct.needs_engine_lock is True
        cached_events, direct_events = list(cached), list(direct)
    finally:
        cached.close()
        direct.close()
    for events in (cached_events, direct_events):
        types = [e["type"] for e in events]
        # then one decode step with and without the cache, timed in alternating repeats, on the engine itself
        assert types[:4] == ["run_started", "token", "token", "run_finished"] and types[-1] == "comparison"
        assert set(types[4:-1]) == {"comparison_sample"}
    assert cached.needs_engine_lock is True  # the comparison ran the engine directly: the worker took the lock
    assert cached_events[3]["token_ids"] == direct_events[3]["token_ids"]


def test_a_processs_loaded_models_load_once_and_keep_one_service_each(tiny_model):
    """What a worker's second run finds: the model it loaded (never reloaded, even when several task threads ask
    first at once) and the batching service it started; stats readers look without loading or starting."""
    from inference_core import LoadedModel

    loads = []

    def load(name, device=None):
        loads.append((name, device))
        return LoadedModel(name, tiny_model, None, tiny_model.tok_embeddings.weight.device)

    models = LoadedModels(load=load)
    assert models.loaded("tiny") is None and models.existing_service("tiny") is None
    got = []
    threads = [threading.Thread(target=lambda: got.append(models.get("tiny"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(got) == 4 and all(m is got[0] for m in got) and loads == [("tiny", None)]
    assert models.loaded("tiny") is got[0]
    service = models.service("tiny")
    assert models.service("tiny") is service and models.existing_service("tiny") is service
    assert service.engine is got[0] and loads == [("tiny", None)]
    models.get("tiny", device="cpu")  # another device is another model
    assert loads == [("tiny", None), ("tiny", "cpu")]
