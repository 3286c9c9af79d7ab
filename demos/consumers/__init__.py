"""Websocket consumers: `/ws/demos/` (start, resume, cancel demo runs) and `/ws/demos/dashboard/`.

protocol.py: the run socket (frames, validation, delivery, teardown); watchdog.py: its timer (queue positions,
quiet runs, the idle close); sockets.py: the one timer and the socket caps every run socket of a process shares;
runs.py: start, limits, resume, cancel; replay.py: serving repeats from stored runs; dashboard.py: the stats
broadcaster. docs/protocol.md.
"""
from .dashboard import DashboardConsumer, collect_stats
from .protocol import DemoConsumer, NotFoundConsumer
from .replay import cache_key_for

__all__ = ["DashboardConsumer", "DemoConsumer", "NotFoundConsumer", "cache_key_for", "collect_stats"]
