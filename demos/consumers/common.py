"""What the demo consumers share: the protocol error, a socket's view of one run, Redis retries and the
database reads they make (each run in a thread)."""
from __future__ import annotations

import asyncio
import heapq
import json
import statistics
import time
from dataclasses import dataclass, field

import redis
from channels.db import database_sync_to_async
from django.utils import timezone

from ..models import Run, RunEvent
from ..runstate import redis_retry  # noqa: F401 - the consumers' Redis retry, re-exported

ACTIVE = Run.ACTIVE


class ProtocolError(Exception):
    """A message the protocol refuses: sent back as an `error` frame with this code (docs/protocol.md)."""

    def __init__(self, code: str, message: str, **extra):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra


@dataclass
class Watch:
    """What this socket knows about one run it is streaming."""

    run_id: str
    source_id: str  # whose stored events to read (a replay reads the original's)
    replay: bool = False
    last_seq: int = -1
    last_activity: float = field(default_factory=time.monotonic)
    created: float = field(default_factory=time.time)
    queued: bool = False  # waiting for a worker: the socket is sent `queued` frames with its position
    last_queue_report: tuple | None = None
    last_queue_sent: float = 0.0
    finished: bool = False
    hb_missing_since: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task | None = None


@database_sync_to_async
def events_between(source_id: str, after: int, upto: int | None = None) -> list[tuple[int, float, dict]]:
    qs = RunEvent.objects.filter(run_id=source_id, seq__gt=after)
    if upto is not None:
        qs = qs.filter(seq__lte=upto)
    return list(qs.order_by("seq").values_list("seq", "t", "event"))


@database_sync_to_async
def get_run(run_id: str, owners: tuple[str, ...] | None = None) -> Run | None:
    """The run, or None; with `owners`, only when one of them owns it (someone else's run looks missing)."""
    qs = Run.objects.filter(pk=run_id)
    if owners is not None:
        qs = qs.filter(owner__in=owners)
    return qs.first()


TYPICAL_RUNS = 20  # finished runs per demo whose median duration is that demo's typical run time
DEFAULT_RUN_S = 10.0  # before any run has finished


def _typical_durations(finished: list[tuple[str, object, object]]) -> tuple[dict[str, float], float]:
    """Per demo, the median duration of its last TYPICAL_RUNS finished runs (as the workers timed them: claimed to
    done), and the median over all of them for a demo with none yet. `finished`: (demo, started, finished), newest
    first."""
    per: dict[str, list[float]] = {}
    every: list[float] = []
    for demo, begin, end in finished:
        took = (end - begin).total_seconds()
        every.append(took)
        if len(per.setdefault(demo, [])) < TYPICAL_RUNS:
            per[demo].append(took)
    fallback = statistics.median(every[:TYPICAL_RUNS]) if every else DEFAULT_RUN_S
    return {demo: statistics.median(times) for demo, times in per.items()}, fallback


def queue_starts(running: list[tuple[str, float]], queued: list[str], typical: dict[str, float],
                 fallback: float) -> list[float]:
    """Seconds from now until each queued run (demos, in queue order) starts: every running run ((demo, seconds it
    has run)) frees its slot after its demo's typical time (a run past it: soon, in a tenth of it), and each waiting
    run takes the first slot to free up, then holds it for its own demo's typical time."""
    free = sorted(max(typical.get(demo, fallback) - ran, 0.1 * typical.get(demo, fallback)) for demo, ran in running)
    free = free or [0.0]
    starts = []
    for demo in queued:
        start = heapq.heappop(free)
        starts.append(start)
        heapq.heappush(free, start + typical.get(demo, fallback))
    return starts


@database_sync_to_async
def _queue_snapshot() -> dict:
    """Every queued run's place (by creation) and when it should start, from the runs running now (how long each
    has run) and each demo's typical run time (queue_starts)."""
    real = Run.objects.filter(replay_of__isnull=True)
    queued = list(real.filter(status=Run.Status.QUEUED).order_by("created_at").values_list("id", "demo")[:5000])
    now = timezone.now()
    running = [(demo, (now - (begun or created)).total_seconds()) for demo, begun, created
               in real.filter(status=Run.Status.RUNNING).values_list("demo", "started_at", "created_at")]
    finished = list(real.filter(status=Run.Status.DONE, started_at__isnull=False, finished_at__isnull=False)
                    .order_by("-finished_at").values_list("demo", "started_at", "finished_at")[:10 * TYPICAL_RUNS])
    typical, fallback = _typical_durations(finished)
    starts = queue_starts(running, [demo for _, demo in queued], typical, fallback)
    return {"place": {str(run_id): i for i, (run_id, _) in enumerate(queued)},
            "start": {str(run_id): t for (run_id, _), t in zip(queued, starts)}, "at": time.monotonic()}


class QueueView:
    """The queue as this process last read it: one set of queries per QUEUE_VIEW_TTL, however many sockets
    wait (each queued socket used to query the database every second, which slowed everyone's delivery)."""

    TTL = 1.0

    def __init__(self) -> None:
        self.snapshot: dict | None = None
        self.refreshing: asyncio.Future | None = None

    async def read(self, max_age: float) -> dict:
        """A view at most `max_age` seconds old; concurrent callers share one refresh."""
        snap = self.snapshot
        if snap is not None and time.monotonic() - snap["at"] <= max_age:
            return snap
        loop = asyncio.get_running_loop()
        if self.refreshing is None or self.refreshing.done() or self.refreshing.get_loop() is not loop:
            self.refreshing = loop.create_task(_queue_snapshot())
        self.snapshot = await asyncio.shield(self.refreshing)
        return self.snapshot


QUEUE_VIEW = QueueView()


async def queue_position(run_id: str, fresh: bool = False) -> dict | None:
    """Where a queued run stands: runs queued before it (any user), and about how many seconds until it starts
    (`eta_s`, whole seconds, counting down as the runs ahead run); None once it left the queue. The estimate
    (queue_starts) assumes the runs now running hold every worker slot (true whenever anything waits). `fresh`:
    read the database now (a run just created is not in an older view)."""
    snap = await _queue_snapshot() if fresh else await QUEUE_VIEW.read(QueueView.TTL)
    ahead = snap["place"].get(str(run_id))
    if ahead is None:
        return None
    left = snap["start"][str(run_id)] - (time.monotonic() - snap["at"])
    return {"position": ahead + 1, "ahead": ahead, "eta_s": float(max(1, round(left)))}


WARMUP_TTL = 1.0  # one keyspace scan per process per second, however many sockets wait
_warmup_seen: list = [0.0, None]  # [valid until (monotonic), warmup_state()]


async def warmup_state() -> dict | None:
    """None when a demo worker takes runs; else what the demo workers are doing meanwhile, from the stats they
    publish (`demos:worker:*`, workers.stats.Stats): `{"phase", "warming_s"}` of the one furthest along, or phase
    `starting` when none has reported yet. A worker of an older version (no `ready` field) counts as ready
    once its engine is loaded. Redis unreachable: None (the queue position is all that can be said).

    Phase `given_up` when none is warm and `make run`'s supervisor has given up on its demo worker (it kept dying):
    nothing is starting then, and the page says so instead of "warming up" (with `restarts`, `last_exit`)."""
    from ..runstate import async_redis, supervisor_key, worker_key

    now = time.monotonic()
    if _warmup_seen[0] > now:
        return _warmup_seen[1]
    try:
        r = async_redis()
        keys = [k async for k in r.scan_iter(match=worker_key("*"), count=100)]
        raws = await r.mget(keys) if keys else []
        supervised = await r.get(supervisor_key())
    except redis.exceptions.RedisError:
        return None
    order = ("starting", "kernels", "loading", "first_decode")
    best: dict | None = None
    state: dict | None = {"phase": "starting", "warming_s": None}
    for raw in raws:
        try:
            stats = json.loads(raw) if raw else None
        except ValueError:
            continue
        if not isinstance(stats, dict):
            continue
        if stats.get("ready", stats.get("engine_loaded")):
            state = None
            break
        phase = stats.get("phase") if stats.get("phase") in order else "starting"
        if best is None or order.index(phase) > order.index(best["phase"]):
            since = stats.get("warmup_started")
            best = {"phase": phase,
                    "warming_s": round(max(0.0, time.time() - since), 1) if isinstance(since, (int, float)) else None}
    if state is not None and best is not None:
        state = best
    if state is not None:
        state = _given_up(supervised) or state
    _warmup_seen[:] = [now + WARMUP_TTL, state]
    return state


SUPERVISED_DEMO_WORKER = "gpu"  # the demo worker's name in scripts/run_stack.py's record (`demos:supervisor`)


def _given_up(raw: bytes | None) -> dict | None:
    """`{"phase": "given_up", …}` when the supervisor's record says it stopped restarting the demo worker."""
    try:
        processes = json.loads(raw).get("processes") or [] if raw else []
    except (ValueError, AttributeError):
        return None
    for process in processes:
        if isinstance(process, dict) and process.get("name") == SUPERVISED_DEMO_WORKER \
                and process.get("state") == "given_up":
            return {"phase": "given_up", "warming_s": None, "restarts": process.get("restarts"),
                    "last_exit": process.get("last_exit")}
    return None


@database_sync_to_async
def set_status(run_id: str, status: str, *, only_if: tuple = (), **fields) -> bool:
    qs = Run.objects.filter(pk=run_id)
    if only_if:
        qs = qs.filter(status__in=only_if)
    fields["status"] = status
    if status in Run.FINAL:
        fields.setdefault("finished_at", timezone.now())
    return qs.update(**fields) > 0
