"""Serving a run from the stored events of an identical finished run.

Runs are live by default. A replay is served only when the student asks for one (`start` with `replay: true`) or,
for a deterministic run, when no worker slot is free (admission.has_free_slot); a replay needs no worker, so a busy class
still sees a preset's numbers at once. Every replay is labelled (the `header` frame: the original run's time,
device, dtype and engine version). Invariants: the cache key includes the engine's own source version and the demo's
code version (its catalog module: a changed engine or runner never replays old results); a visitor is replayed
someone else's run only when every text they typed is a demo default or preset (public), so a replay never reveals
another visitor's prompt, and the frame names the source run only when it is the visitor's own.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from ..models import Run, public_summary
from ..registry import get_spec
from .common import ACTIVE, events_between, get_run, set_status

log = logging.getLogger(__name__)
PUBLIC_SOURCE = "shared"  # `replayed_from` when the stored run was another visitor's (of public inputs)


@lru_cache(maxsize=None)
def demo_code_version(demo: str) -> str:
    """A hash of the demo's own code: its catalog module (spec and runner) and the course's trace events. The
    runners live in the demos app, outside the engine's source, so a replay key names both versions."""
    import inspect

    from ..catalog import events

    module = inspect.getmodule(get_spec(demo).load_runner())
    digest = hashlib.sha256()
    for mod in (module, events):
        path = Path(inspect.getsourcefile(mod)) if mod is not None else None
        digest.update(path.read_bytes() if path is not None and path.is_file() else b"unknown")
    return digest.hexdigest()[:16]


def cache_key_for(demo: str, params: dict, model: str, version: str) -> str:
    blob = json.dumps({"demo": demo, "params": params, "model": model, "engine": version,
                       "demo_code": demo_code_version(demo)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def public_inputs(demo: str, params: dict) -> bool:
    """Every text parameter is the demo's default or a preset's value: nothing a visitor typed."""
    spec = get_spec(demo)
    for name, pspec in spec.params.items():
        if pspec.kind != "str" or params.get(name) == pspec.default:
            continue
        if not any(preset.get(name) == params.get(name) for preset in spec.presets):
            return False
    return True


def replay_source(demo: str, params: dict, key: str, owners: tuple[str, ...]) -> Run | None:
    """The newest finished identical run this visitor may be replayed (database access: call in a thread)."""
    runs = Run.objects.filter(cache_key=key, status=Run.Status.DONE, replay_of__isnull=True, n_events__gt=0)
    if not public_inputs(demo, params):
        runs = runs.filter(owner__in=owners)
    return runs.order_by("-finished_at").first()


class ReplayMixin:
    """Replays for `DemoConsumer` (protocol.py)."""

    def _replay_label(self, source: Run | None) -> str:
        """What a replayed run's frames say it was replayed from: the source's id only if it is one's own."""
        if source is not None and source.owner in self.owners:
            return str(source.id)
        return PUBLIC_SOURCE

    async def _replay(self, w) -> None:
        """Serve a run from the stored events of an identical finished run, paced like it."""
        try:
            source = await get_run(w.source_id)
            events = await events_between(w.source_id, w.last_seq)
            speed = settings.DEMO_REPLAY_SPEED or 1.0
            prev_t = None
            for seq, t, event in events:
                if prev_t is not None and t > prev_t:
                    await asyncio.sleep(min((t - prev_t) / speed, 5.0))
                prev_t = t
                await self._deliver(w, seq, event)
            summary = public_summary(source.summary)  # another visitor's run, perhaps: not its worker
            summary["replayed"] = True
            await set_status(w.run_id, Run.Status.DONE, only_if=ACTIVE, summary=summary, n_events=source.n_events)
            await self._finish(w, {"type": "done", "run_id": w.run_id, "status": "done", "summary": summary,
                                   "replayed_from": self._replay_label(source)})
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("replay of %s failed", w.source_id)
            await set_status(w.run_id, Run.Status.ERROR, only_if=ACTIVE, error_code="replay_failed")
            await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "replay_failed",
                                   "message": "replaying the stored run failed"})
