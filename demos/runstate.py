"""Names and Redis state shared by the consumer (Daphne) and the worker (Celery).

- Channels group per run: `run.<uuid hex>` (only the run's owner ever joins it).
- `demos:cancel:<run>`: set → the worker stops between steps and finishes the run as cancelled.
- `demos:detach:<run>`: the time its last socket closed; the worker cancels after DEMO_ORPHAN_GRACE
  unless a `resume` deleted it.
- `demos:hb:<run>`: the worker's heartbeat for a running run (expires after DEMO_HEARTBEAT_TTL).
- `demos:worker:<hostname>:<pid>`: JSON stats of a worker process, for the dashboard.
- `demos:fair:<queue>:owners`, `demos:fair:<queue>:q:<address>`: queued runs per client address, per demo
  queue, taken fairly (see fair_push).
"""
from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable

import redis
import redis.asyncio as aioredis
from django.conf import settings

CPU_QUEUE = "cpu"  # narration and other slow jobs; every other queue runs demos on the engine


def demo_queue() -> str:
    """The queue this process sends demo runs to (settings.DEMO_TASK_QUEUE, `gpu` by default)."""
    return settings.DEMO_TASK_QUEUE


def run_group(run_id) -> str:
    return f"run.{str(run_id).replace('-', '')}"


def cancel_key(run_id) -> str:
    return f"demos:cancel:{run_id}"


def detach_key(run_id) -> str:
    return f"demos:detach:{run_id}"


def watchers_key(run_id) -> str:
    return f"demos:watchers:{run_id}"


# A run is "detached" (and cancelled after a grace period) only when its last socket goes away.
# Both scripts are atomic, so a resume racing a late disconnect can never leave a watched run detached.
ATTACH_LUA = """
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], 3600)
redis.call('DEL', KEYS[2])
return 1
"""
DETACH_LUA = """
redis.call('SREM', KEYS[1], ARGV[1])
if redis.call('SCARD', KEYS[1]) == 0 then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', 3600)
  return 1
end
return 0
"""


async def attach(run_id, channel_name: str) -> None:
    await async_redis().eval(ATTACH_LUA, 2, watchers_key(run_id), detach_key(run_id), channel_name)


async def detach(run_id, channel_name: str, now: float) -> bool:
    return bool(await async_redis().eval(DETACH_LUA, 2, watchers_key(run_id), detach_key(run_id),
                                         channel_name, f"{now:.3f}"))


# Fair admission: queued runs wait in one list per client address (inferencelab/client_address.py; the lists'
# "owners" below are those addresses). When a worker slot frees, the waiting address with the fewest runs on the
# engine goes next (ties: the address waiting longest since its last turn), so one address's many runs (however
# many sockets or sessions sent them) cannot hold every slot while another visitor waits. Each queued run also sends one Celery task (a
# ticket); the worker thread that takes a ticket runs the *next fair run*, which may be another run than the
# ticket's own. Tickets and runs are equal in number, so every run gets one. Each demo queue has its own lists,
# so a ticket only ever takes a run that was routed to its queue.
def fair_owners_key(queue: str | None = None) -> str:
    """Addresses with waiting runs on `queue`, in turn order."""
    return f"demos:fair:{queue or demo_queue()}:owners"


def fair_queue_key(owner: str, queue: str | None = None) -> str:
    return f"demos:fair:{queue or demo_queue()}:q:{owner}"


FAIR_PUSH_LUA = """
redis.call('RPUSH', KEYS[2], ARGV[2])
if not redis.call('LPOS', KEYS[1], ARGV[1]) then redis.call('RPUSH', KEYS[1], ARGV[1]) end
return 1
"""
# Atomically: pick the waiting address with the fewest running runs (ARGV: queue-key prefix, then address/count
# pairs; ties go to the address first in turn order), take its next run, and move it to the back of the turn
# order (or drop it when it has no more). Two workers freeing slots at once therefore serve two owners.
FAIR_POP_LUA = """
local running = {}
for i = 2, #ARGV, 2 do running[ARGV[i]] = tonumber(ARGV[i + 1]) end
local owners = redis.call('LRANGE', KEYS[1], 0, -1)
local best, best_count = nil, nil
for _, owner in ipairs(owners) do
  local count = running[owner] or 0
  if best == nil or count < best_count then best, best_count = owner, count end
end
if best == nil then return false end
local queue = ARGV[1] .. best
local run = redis.call('LPOP', queue)
redis.call('LREM', KEYS[1], 0, best)
if redis.call('LLEN', queue) > 0 then redis.call('RPUSH', KEYS[1], best) end
return run
"""


def fair_push(owner: str, run_id: str, queue: str | None = None) -> None:
    sync_redis().eval(FAIR_PUSH_LUA, 2, fair_owners_key(queue), fair_queue_key(owner, queue), owner, str(run_id))


def fair_pop(running: Callable[[list[str]], dict[str, int]] = lambda owners: {}, queue: str | None = None) -> str | None:
    """The next run queued on `queue`, or None when none waits. `running(addresses)` counts each address's runs
    now running."""
    r = sync_redis()
    owners_key = fair_owners_key(queue)
    for _ in range(8):  # an owner whose list emptied between the two calls: look again
        owners = [o.decode() for o in r.lrange(owners_key, 0, -1)]
        if not owners:
            return None
        counts = running(owners)
        pairs = [str(item) for owner in owners for item in (owner, counts.get(owner, 0))]
        run = r.eval(FAIR_POP_LUA, 1, owners_key, fair_queue_key("", queue), *pairs)
        if run:
            return run.decode() if isinstance(run, bytes) else run
    return None


def heartbeat_key(run_id) -> str:
    return f"demos:hb:{run_id}"


def worker_key(name: str) -> str:
    return f"demos:worker:{name}"


_sync_lock = threading.Lock()
_sync_clients: dict[str, redis.Redis] = {}
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, aioredis.Redis]]" = (
    weakref.WeakKeyDictionary()
)


def sync_redis() -> redis.Redis:
    url = settings.REDIS_URL
    with _sync_lock:
        client = _sync_clients.get(url)
        if client is None:
            client = _sync_clients[url] = redis.Redis.from_url(
                url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30
            )
        return client


def async_redis() -> aioredis.Redis:
    """A client bound to the running event loop (redis.asyncio connections can't cross loops)."""
    loop = asyncio.get_running_loop()
    url = settings.REDIS_URL
    entry = _async_clients.get(loop)
    if entry is None or entry[0] != url:
        entry = (url, aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5))
        _async_clients[loop] = entry
    return entry[1]
