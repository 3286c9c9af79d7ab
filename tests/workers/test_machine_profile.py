"""The demo worker measures its machine while idle and publishes it as a MachineProfile (issues 15, 24).

Measured for real (the real engine, a real copy, matmul and decode steps) with the short `quick` setting.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from celery.signals import worker_ready

from workers import measure as machine_profile
from serverprofile.models import MachineProfile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_stats_reporter(monkeypatch):
    """The startup hooks also start the dashboard stats reporter, which talks to Redis: not here."""
    from workers.stats import STATS

    monkeypatch.setattr(STATS, "start_reporter", lambda: None)
    monkeypatch.setattr(STATS, "publish", lambda: None)


def test_quick_measurement_without_a_model_is_real_and_cheap():
    profile = machine_profile.measure(quick=True)
    assert profile["bandwidth_gbps"] > 0.1 and profile["matmul_gflops"] > 0.1
    assert profile["decode_step_ms"] is None and profile["device"] == "cpu" and profile["device_name"]
    assert profile["duration_s"] < 20


def test_the_bench_runs_the_shared_measuring_code():
    spec = importlib.util.spec_from_file_location("machine_roofline_bench", ROOT / "bench" / "machine_roofline.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.measure is machine_profile.measure
    assert bench.copy_bandwidth is machine_profile.copy_bandwidth and bench.matmul_flops is machine_profile.matmul_flops


@pytest.mark.model
@pytest.mark.django_db
def test_worker_start_warms_up_then_measures_while_idle_and_stores_medians(settings, no_stats_reporter, monkeypatch):
    from demos.versions import engine_version
    from workers import machine_profile as worker
    from workers.engine import get_engine
    from workers.stats import STATS

    settings.MACHINE_PROFILE_QUICK = True
    settings.MACHINE_PROFILE_REPEATS = 3
    threads = []
    monkeypatch.setattr(worker, "start", lambda target: threads.append(target))
    monkeypatch.setattr(STATS, "phase", "starting")
    worker_ready.send(sender=None)  # what Celery sends when the worker is up: every receiver runs
    assert STATS.ready  # warm-up done (kernels, engine, one decode) before the worker takes runs
    assert threads == [worker.profile_loop] and not MachineProfile.objects.exists()  # measured apart, later

    worker.profile_loop(once=True)  # what the thread does (here in the test's database transaction)
    row = MachineProfile.objects.get()
    engine = get_engine()
    assert row.model == settings.ENGINE_MODEL and row.device == str(engine.device) and row.dtype == "float32"
    assert row.bandwidth_gbps > 0.1 and row.matmul_gflops > 0.1 and row.repeats == 3
    assert row.bandwidth_spread_gbps >= 0 and row.matmul_spread_gflops >= 0 and row.decode_step_spread_ms >= 0
    assert 0 < row.decode_step_ms < 10_000
    assert row.decode_bytes_per_step > 100e6  # SmolLM2-135M in fp32 reads ~540 MB per step
    assert row.engine_version == engine_version() and row.device_name and row.threads >= 1 and row.worker
    assert row.duration_s < 30


def test_the_profile_is_measured_only_while_the_worker_is_idle(monkeypatch):
    """Warming up or running: no measurement starts. A run that starts during one voids it; it is taken again."""
    from workers import machine_profile as worker

    monkeypatch.setattr(worker, "IDLE_POLL_S", 0.01)
    monkeypatch.setattr(worker, "QUIET_S", 0.01)
    timeline = iter([None, None,  # warming up, then busy with a run: wait
                     6, 7,  # idle, but a run started (and ended) within the quiet moment: no measurement
                     7, 7, 8,  # idle and quiet, but a run started during the measurement: voided
                     8, 8, 8, 9, 9, 9])  # idle and quiet throughout, twice
    measured = []
    monkeypatch.setattr(machine_profile, "measure", lambda engine, quick: measured.append(1) or {"n": len(measured)})
    samples = worker.measure_while_idle(object(), lambda: next(timeline), repeats=2, quick=True)
    assert len(measured) == 3 and samples == [{"n": 2}, {"n": 3}]


def test_the_stored_figures_are_medians_with_their_spread(db):
    from workers import machine_profile as worker

    base = {"measured_at": "2026-11-26T10:00:00+00:00", "model": "m", "device": "cpu", "device_name": "x",
            "threads": 2, "dtype": "float32", "torch_version": "2", "decode_bytes_per_step": 1, "duration_s": 1.0}
    samples = [{**base, "bandwidth_gbps": bw, "matmul_gflops": mm, "decode_step_ms": ms}
               for bw, mm, ms in [(10.0, 100.0, 20.0), (12.0, 90.0, 25.0), (11.0, 120.0, 21.0)]]
    row = worker.store(samples)
    assert (row.bandwidth_gbps, row.bandwidth_spread_gbps) == (11.0, 2.0)
    assert (row.matmul_gflops, row.matmul_spread_gflops) == (100.0, 30.0)
    assert (row.decode_step_ms, row.decode_step_spread_ms, row.repeats) == (21.0, 5.0, 3)


@pytest.mark.django_db
def test_a_cpu_only_worker_measures_nothing(settings, no_stats_reporter):
    settings.MACHINE_PROFILE_QUICK = True
    class CpuWorker:  # a Celery consumer as the hooks see it: `-Q cpu` only
        app = SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from={"cpu": 1})))

    cpu_worker = CpuWorker()
    worker_ready.send(sender=cpu_worker)
    assert not MachineProfile.objects.exists()


@pytest.mark.django_db
def test_profile_can_be_switched_off(settings, no_stats_reporter, monkeypatch):
    from workers import machine_profile

    monkeypatch.setattr(machine_profile, "get_engine", lambda: pytest.fail("no engine needed"))
    settings.MACHINE_PROFILE = False
    from workers.machine_profile import publish_machine_profile

    publish_machine_profile(sender=None)
    assert not MachineProfile.objects.exists()
