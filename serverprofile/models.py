"""One row per measurement: a demo worker publishes what its machine achieved while idle, at start and when stale."""
from __future__ import annotations

from django.db import models


class MachineProfile(models.Model):
    measured_at = models.DateTimeField(db_index=True)
    worker = models.CharField(max_length=200, blank=True)  # host:pid of the worker that measured
    device = models.CharField(max_length=32)  # "cpu", "cuda:0"
    device_name = models.CharField(max_length=200)  # the processor, as the OS names it
    threads = models.PositiveIntegerField(default=0)  # torch intra-op threads during the measurement
    dtype = models.CharField(max_length=32)
    model = models.CharField(max_length=100, blank=True)
    engine_version = models.CharField(max_length=64, blank=True)  # as runs record it (demos.consumers.replay)
    torch_version = models.CharField(max_length=64, blank=True)
    bandwidth_gbps = models.FloatField()  # copy: bytes read + written per second
    matmul_gflops = models.FloatField()  # fp32, 1024 × 1024 × 1024
    decode_step_ms = models.FloatField(null=True, blank=True)  # batch 1, median of the engine's own step times
    decode_bytes_per_step = models.BigIntegerField(null=True, blank=True)  # what the engine counts one step reading
    duration_s = models.FloatField(default=0.0)  # what one measurement took
    # The figures above are medians of `repeats` measurements taken while the worker was idle; each spread is
    # the largest minus the smallest of them (0 for a row of one measurement, as rows before issue 24 were).
    repeats = models.PositiveIntegerField(default=1)
    bandwidth_spread_gbps = models.FloatField(default=0.0)
    matmul_spread_gflops = models.FloatField(default=0.0)
    decode_step_spread_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-measured_at"]
        get_latest_by = "measured_at"

    def __str__(self) -> str:
        return (f"{self.device_name} ({self.device}, {self.dtype}): {self.bandwidth_gbps:.1f} GB/s, "
                f"{self.matmul_gflops:.0f} GFLOP/s, {self.measured_at:%Y-%m-%d %H:%M} UTC")
