"""Demo-runtime knobs. Each is a Django setting when defined there, else an environment variable
(so test subprocesses can be tuned), else the default here."""
from __future__ import annotations

import os

from django.conf import settings

_DEFAULTS = {
    "DEMO_MAX_CONCURRENT_RUNS": 2,  # queued + running runs per user/session
    "DEMO_RUNS_PER_MINUTE": 12,  # started runs per user/session in any 60 s window
    # Queued + running runs per client address (inferencelab/client_address.py; every address counts, loopback
    # included): at most this, and at most the address's fair share of the worker slots (consumers/runs.py).
    "DEMO_MAX_RUNS_PER_ADDRESS": 20,
    "DEMO_RUNS_PER_MINUTE_PER_ADDRESS": 60,  # started runs per client address in any 60 s window
    "DEMO_MAX_QUEUED": 100,  # runs waiting for a worker, all visitors together; beyond it `busy`
    "DEMO_DASHBOARD_SOCKETS_PER_ADDRESS": 4,  # open dashboard sockets per client address (per Daphne process)
    "DEMO_REAPER_INTERVAL": 5.0,  # how often the server looks for runs whose worker died
    "DEMO_STALL_SECONDS": 3.0,  # quiet this long → the consumer checks the run's real state
    "DEMO_HEARTBEAT_INTERVAL": 1.0,  # the worker refreshes a run's heartbeat key this often
    "DEMO_HEARTBEAT_TTL": 4.0,  # a heartbeat key expires this long after the worker's last refresh…
    # …and a run is failed (`worker_lost`) once it has been missing this long while Redis answered promptly:
    # a Redis pause or restart (no heartbeat can be written then) never fails a healthy run.
    "DEMO_HEARTBEAT_GRACE": 2.0,
    "DEMO_QUEUE_TIMEOUT": 300.0,  # queued this long without a worker picking it up → error
    "DEMO_ORPHAN_GRACE": 15.0,  # a run whose socket closed is cancelled unless resumed within this
    "DEMO_REPLAY_CACHE": True,  # a stored identical run may be replayed: when asked for, or when no worker slot is free
    # Worker slots (runs the workers can run at once); 0 = the sum the live workers report (their -c). A start
    # runs live while fewer real runs than this are queued or running; otherwise a stored run may be replayed.
    "DEMO_WORKER_SLOTS": 0,
    "DEMO_REPLAY_SPEED": 1.0,  # 1.0 = paced like the original run
    "DEMO_STATS_INTERVAL": 1.0,  # worker stats and dashboard refresh period
    "DEMO_MESSAGE_RATE": 20.0,  # messages per second one socket may send (sustained)…
    "DEMO_MESSAGE_BURST": 60.0,  # …and in a burst; beyond that each message gets `slow_down`
}


def get(name: str):
    default = _DEFAULTS[name]
    if hasattr(settings, name):
        return getattr(settings, name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    if isinstance(default, bool):
        return raw.lower() in {"1", "true", "yes", "on"}
    return type(default)(raw)

