"""Names and Redis state shared by the consumer (Daphne) and the worker (Celery).

- Channels group per run: `run.<uuid hex>` (only the run's owner ever joins it).
- `demos:cancel:<run>`: set → the worker stops between steps and finishes the run as cancelled.
- `demos:detach:<run>`: the time its last socket closed; the worker cancels after DEMO_ORPHAN_GRACE
  unless a `resume` deleted it.
- `demos:hb:<run>`: the worker's heartbeat for a running run (expires after DEMO_HEARTBEAT_TTL).
- `demos:worker:<hostname>:<pid>`: JSON stats of a worker process, for the dashboard.
"""
from __future__ import annotations

import asyncio
import threading
import weakref

import redis
import redis.asyncio as aioredis
from django.conf import settings

GPU_QUEUE = "gpu"
CPU_QUEUE = "cpu"


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
