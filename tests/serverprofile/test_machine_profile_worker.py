"""The demo worker measures its machine when it starts and publishes it as a MachineProfile (issue 15).

Measured for real (the real engine, a real copy, matmul and decode steps) with the short `quick` setting.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from celery.signals import worker_ready

from inference_core.engine import machine_profile
from serverprofile.models import MachineProfile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_stats_reporter(monkeypatch):
    """The startup hooks also start the dashboard stats reporter, which talks to Redis: not here."""
    from demos import tasks

    monkeypatch.setattr(tasks.STATS, "start_reporter", lambda: None)
    monkeypatch.setattr(tasks.STATS, "publish", lambda: None)


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
def test_worker_start_measures_and_stores_the_profile(settings, no_stats_reporter):
    from demos.consumers import engine_version
    from demos.tasks import get_engine

    settings.MACHINE_PROFILE_QUICK = True
    worker_ready.send(sender=None)  # what Celery sends when the worker is up: every receiver runs

    row = MachineProfile.objects.get()
    engine = get_engine()
    assert row.model == settings.ENGINE_MODEL and row.device == str(engine.device) and row.dtype == "float32"
    assert row.bandwidth_gbps > 0.1 and row.matmul_gflops > 0.1
    assert 0 < row.decode_step_ms < 10_000
    assert row.decode_bytes_per_step > 100e6  # SmolLM2-135M in fp32 reads ~540 MB per step
    assert row.engine_version == engine_version() and row.device_name and row.threads >= 1 and row.worker
    assert row.duration_s < 30


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
    from demos import tasks

    monkeypatch.setattr(tasks, "get_engine", lambda: pytest.fail("no engine needed"))
    settings.MACHINE_PROFILE = False
    from serverprofile.worker import publish_machine_profile

    publish_machine_profile(sender=None)
    assert not MachineProfile.objects.exists()
