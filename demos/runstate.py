"""Names and Redis state shared by the consumer (Daphne) and the worker (Celery).

- Channels group per run: `run.<uuid hex>` (only the run's owner ever joins it).
- `demos:cancel:<run>`: set → the worker stops between steps and finishes the run as cancelled.
- `demos:watchers:<run>`: the sockets watching the run, each as `<server id>|<channel name>`.
- `demos:server:<server id>`: the time that web server process last beat (every SERVER_BEACON_INTERVAL, from its
  beacon thread), so a socket of a server that died without saying goodbye counts as gone;
  `demos:servers:last-beat`: the time any server last beat.
- `demos:detach:<run>`: the time its last socket closed (or a worker first found only sockets of dead servers);
  the worker cancels after DEMO_ORPHAN_GRACE unless a `resume` deleted it, and drops a queued run instead of
  computing it.
- `demos:hb:<run>`: the worker's heartbeat for a running run (expires after DEMO_HEARTBEAT_TTL).
- `demos:worker:<hostname>:<pid>`: JSON stats of a worker process, for the dashboard.
- `demos:supervisor`: JSON restart records of the processes `make run` supervises (scripts/run_stack.py).
- `demos:fair:<queue>:owners`, `demos:fair:<queue>:q:<owner>`: queued runs per owner (user, session, or a
  cookie-less client address), per demo queue, taken fairly (see fair_push).
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
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


def server_key(server_id: str) -> str:
    return f"demos:server:{server_id}"


def web_beat_key() -> str:
    """The time any web server last beaconed: whether the web tier (and Redis) is beaconing at all right now."""
    return "demos:servers:last-beat"


def supervisor_key() -> str:
    return "demos:supervisor"


# This web server process, as its sockets are recorded in a run's watchers.
SERVER_ID = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
SERVER_BEACON_INTERVAL = 2.0  # a web server writes the time into its `demos:server:<id>` this often…
SERVER_TTL = 6.0  # …and counts as dead once its last beat is older than this
_beacon_started = threading.Event()


def start_server_beacon() -> None:
    """Beat this process's `demos:server:<id>` from a daemon thread (once per process; every attach calls it)."""
    if _beacon_started.is_set():
        return
    with _sync_lock:
        if _beacon_started.is_set():
            return
        _beacon_started.set()

    def beat():
        while True:
            now = f"{time.time():.3f}"
            try:
                sync_redis().pipeline(transaction=False).set(server_key(SERVER_ID), now, ex=3600).set(
                    web_beat_key(), now, ex=3600).execute()
            except redis.exceptions.RedisError:
                pass  # Redis away: the next beat (workers forgive late beats while no server beats)
            time.sleep(SERVER_BEACON_INTERVAL)

    threading.Thread(target=beat, name="demos-server-beacon", daemon=True).start()


def _member(channel_name: str) -> str:
    return f"{SERVER_ID}|{channel_name}"


# A run is "detached" (and cancelled after a grace period) only when its last socket goes away.
# Both scripts are atomic, so a resume racing a late disconnect can never leave a watched run detached.
# Attaching also beats for this server at once (its beacon thread may not have run yet).
ATTACH_LUA = """
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], 3600)
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[3], ARGV[2], 'EX', 3600)
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
    start_server_beacon()
    await async_redis().eval(ATTACH_LUA, 3, watchers_key(run_id), detach_key(run_id), server_key(SERVER_ID),
                             _member(channel_name), f"{time.time():.3f}")


async def detach(run_id, channel_name: str, now: float) -> bool:
    return bool(await async_redis().eval(DETACH_LUA, 2, watchers_key(run_id), detach_key(run_id),
                                         _member(channel_name), f"{now:.3f}"))


# Since when has nobody watched the run? A watcher whose server beat within SERVER_TTL watches (and any detach
# time is then stale, e.g. set while Redis was paused, and goes). Watchers whose servers all stopped beating
# (Daphne killed: no disconnect ever ran) went with their server's last beat, provided some server beats now:
# then the silence is theirs, not Redis's. While no server beats (Redis just came back from a pause, or the web
# tier is down), the grace period starts now instead. A member without a server id predates server ids: its
# server was restarted since. A run never watched (no watchers: queued by code, or its Redis lost everything)
# has no detach time and is never called gone.
ORPHAN_LUA = """
local members = redis.call('SMEMBERS', KEYS[1])
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local newest = nil
for _, member in ipairs(members) do
  local sep = string.find(member, '|', 1, true)
  if sep then
    local beat = tonumber(redis.call('GET', ARGV[1] .. string.sub(member, 1, sep - 1)))
    if beat and now - beat < ttl then
      redis.call('DEL', KEYS[2])
      return false
    end
    if beat and (newest == nil or beat > newest) then newest = beat end
  end
end
if #members > 0 then
  local web = tonumber(redis.call('GET', KEYS[3]))
  local since = now
  if newest and web and now - web < ttl then since = newest end
  redis.call('SET', KEYS[2], string.format('%.3f', since), 'NX', 'EX', 3600)
end
return redis.call('GET', KEYS[2])
"""


def unwatched_for(run_id, now: float | None = None) -> float | None:
    """Seconds since the last socket watching the run went away; None while one watches or none ever did.
    Raises RedisError when Redis cannot say."""
    now = time.time() if now is None else now
    since = sync_redis().eval(ORPHAN_LUA, 3, watchers_key(run_id), detach_key(run_id), web_beat_key(),
                              server_key(""), f"{now:.3f}", SERVER_TTL)
    if not since:
        return None
    try:
        return max(0.0, now - float(since))
    except ValueError:
        return None


# Fair admission (issue 38: by person, not by address): queued runs wait in one list per owner (demos.identity: a
# user, a visitor's session, or for cookie-less sockets their client address). When a worker slot frees, the
# waiting owner with the fewest runs on the engine goes next; among owners with as many, the one whose client
# address has the fewest running (so new sessions minted from one address do not push another network's visitor
# back), then the owner waiting longest since its last turn. A class of 60 behind one NAT is 60 owners: each gets
# its turn. Each queued run also sends one Celery task (a
# ticket); the worker thread that takes a ticket runs the *next fair run*, which may be another run than the
# ticket's own. Tickets and runs are equal in number, so every run gets one. Each demo queue has its own lists,
# so a ticket only ever takes a run that was routed to its queue.
def fair_owners_key(queue: str | None = None) -> str:
    """Owners with waiting runs on `queue`, in turn order."""
    return f"demos:fair:{queue or demo_queue()}:owners"


def fair_queue_key(owner: str, queue: str | None = None) -> str:
    return f"demos:fair:{queue or demo_queue()}:q:{owner}"


FAIR_PUSH_LUA = """
redis.call('RPUSH', KEYS[2], ARGV[2])
if not redis.call('LPOS', KEYS[1], ARGV[1]) then redis.call('RPUSH', KEYS[1], ARGV[1]) end
return 1
"""
# Atomically: pick the waiting owner with the fewest running runs, ties to the fewest running from its address,
# then to the owner first in turn order (ARGV: queue-key prefix, then owner/own count/address count triples), take
# its next run, and move it to the back of the turn order (or drop it when it has no more). Two workers freeing
# slots at once therefore serve two owners.
FAIR_POP_LUA = """
local own, near = {}, {}
for i = 2, #ARGV, 3 do own[ARGV[i]] = tonumber(ARGV[i + 1]); near[ARGV[i]] = tonumber(ARGV[i + 2]) end
local owners = redis.call('LRANGE', KEYS[1], 0, -1)
local best, best_own, best_near = nil, nil, nil
for _, owner in ipairs(owners) do
  local o, n = own[owner] or 0, near[owner] or 0
  if best == nil or o < best_own or (o == best_own and n < best_near) then best, best_own, best_near = owner, o, n end
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


def fair_pop(running: Callable[[list[str]], dict[str, tuple[int, int]]] = lambda owners: {},
             queue: str | None = None) -> str | None:
    """The next run queued on `queue`, or None when none waits. `running(owners)` gives each owner's runs now
    running and those of its client address: (own, address)."""
    r = sync_redis()
    owners_key = fair_owners_key(queue)
    for _ in range(8):  # an owner whose list emptied between the two calls: look again
        owners = [o.decode() for o in r.lrange(owners_key, 0, -1)]
        if not owners:
            return None
        counts = running(owners)
        triples = [str(item) for owner in owners for item in (owner, *counts.get(owner, (0, 0)))]
        run = r.eval(FAIR_POP_LUA, 1, owners_key, fair_queue_key("", queue), *triples)
        if run:
            return run.decode() if isinstance(run, bytes) else run
    return None


def heartbeat_key(run_id) -> str:
    return f"demos:hb:{run_id}"


class RedisHealth:
    """When this process last saw Redis misbehave: a call that failed, or answered later than SLOW_ANSWER.

    While Redis hiccups (paused, restarting, busy in DEBUG SLEEP) no worker can refresh a heartbeat, so a
    heartbeat found missing then, or just after, says nothing about its worker."""

    SLOW_ANSWER = 1.0

    def __init__(self) -> None:
        self.trouble_at = time.monotonic()  # a process just started gives every worker a full grace

    def trouble(self) -> None:
        self.trouble_at = time.monotonic()


REDIS_HEALTH = RedisHealth()


def judge_heartbeat(present: bool, asked_at: float, missing_since: float | None,
                    grace: float) -> tuple[bool, float | None]:
    """(lost, missing_since) after one read of a running run's heartbeat, asked at `asked_at` (monotonic).

    Lost = missing on every read for `grace` seconds (DEMO_HEARTBEAT_GRACE) during which Redis answered promptly
    throughout: any Redis trouble (REDIS_HEALTH) since the first miss starts the clock again, so a pause shorter
    than the heartbeat's TTL plus the grace never fails a healthy run, while a dead worker is found within
    DEMO_HEARTBEAT_TTL + grace (+ one check interval)."""
    now = time.monotonic()
    if now - asked_at > RedisHealth.SLOW_ANSWER:
        REDIS_HEALTH.trouble()
    if present:
        return False, None
    if missing_since is None or missing_since <= REDIS_HEALTH.trouble_at:
        missing_since = now
    return now - missing_since >= grace, missing_since


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


async def redis_retry(fn, *args, attempts: int = 5, delay: float = 0.2):
    """`await fn(*args)` (an idempotent Redis or channel-layer call), again after a pause if the Redis
    connection was lost.

    After Redis restarts, the first command on a pooled (or the channel layer's pub/sub) connection
    fails with "Connection lost"; the next one reconnects. The pub/sub layer's own receive task
    reconnects at the same time, and a SUBSCRIBE racing it fails with asyncio's RuntimeError
    "readuntil() called while another coroutine is already waiting". Without this, the first resume
    after a restart would answer `internal_error`.
    """
    for attempt in range(attempts):
        try:
            return await fn(*args)
        except (redis.exceptions.ConnectionError, ConnectionError, RuntimeError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(delay * (attempt + 1))
