"""One real address per visitor, over real sockets: a real Daphne directly (TRUSTED_PROXIES=0) and behind a real
nginx (TRUSTED_PROXIES=1, `proxy_set_header X-Forwarded-For $remote_addr;`). Each client binds its own
loopback address (127.0.0.2, 127.0.0.3, …) and forges X-Forwarded-For: the forged entries change nothing —
not the address a run is stored under, not the address's socket cap, not the queue's turn, not the dashboard cap,
not the sign-in throttle."""
from __future__ import annotations

import asyncio
import signal
import statistics
import time

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from nginx_proxy import MISSING, NGINX, Nginx
from test_demos_scaleout import WS
from wire import Browser

from demos.models import Run, RunEvent

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

FLOODER, STUDENT, OWNER = "127.0.0.2", "127.0.0.3", "127.0.0.4"
SLOTS = 4  # DEMO_WORKER_SLOTS of the Daphne under test
SOCKETS_PER_VISITOR = 8  # DEMO_SOCKETS_PER_VISITOR: a session's, or one address's cookie-less sockets together
RUNS_PER_PERSON = 2  # DEMO_MAX_CONCURRENT_RUNS: queued + running, per user or session (or cookie-less address)
# Slow on purpose (every step recomputes a ~300-token prefix): the flood's runs hold their slots for seconds.
FLOOD = {"prompt": "Write a long letter to a friend about the sea. " + "The waves roll in. " * 60,
         "max_new_tokens": 128, "use_cache": False}


def forged(i: int) -> dict:
    return {"X-Forwarded-For": f"10.{i % 250}.0.1, 127.0.0.1, unknown, 192.0.2.{i % 250}"}


@pytest.fixture(scope="module", params=["direct", "nginx"])
def front(request, demo_stack, tmp_path_factory):
    """(how, port): the port clients connect to — Daphne itself, or nginx in front of it."""
    how = request.param
    if how == "nginx" and NGINX is None:
        pytest.skip(MISSING)
    name = f"daphne-{how}"
    demo_stack.start_daphne(name, env={"TRUSTED_PROXIES": "0" if how == "direct" else "1",
                                       "DEMO_WORKER_SLOTS": str(SLOTS)})
    proxy = Nginx(tmp_path_factory.mktemp("nginx"), demo_stack.http_ports[name]) if how == "nginx" else None
    try:
        yield how, proxy.port if proxy else demo_stack.http_ports[name]
    finally:
        if proxy:
            proxy.stop()
        demo_stack.kill(name, signal.SIGTERM)


async def start(ws: WS, params: dict, ref: str) -> dict:
    await ws.send({"action": "start", "demo": "kv-cache", "params": params, "live": True, "ref": ref})
    while True:
        frame = await ws.recv()
        if frame.get("ref") == ref and frame["type"] in ("accepted", "error"):
            return frame


@sync_to_async
def runs_from(address: str) -> list[Run]:
    return list(Run.objects.filter(client=address).order_by("created_at"))


async def test_a_flood_from_one_address_holds_only_its_share_and_a_newcomer_goes_next(front, demo_stack):
    """200 starts from one address, cookie-less and with fresh sessions, every socket forging X-Forwarded-For:
    each person (a session, or the address's cookie-less sockets together) holds its own share, and a newcomer
    from another network goes next when a slot frees."""
    how, port = front
    sockets = []
    for i in range(2 * SOCKETS_PER_VISITOR):
        cookie = {}
        if i % 2:  # every other socket brings a brand-new session: a new owner, the same address
            page = Browser(port, FLOODER, forged(i))
            page.request("POST", "/demos/visitor/")  # what the page's script does before a first run
            cookie = {"Cookie": f"sessionid={page.cookies['sessionid']}"}
        sockets.append(await WS.connect(port, path="/ws/demos/", source=FLOODER, headers={**forged(i), **cookie}))
    # The address's cookie-less sockets are one visitor, whatever each forges: one more than its cap is refused.
    extra = await WS.connect(port, path="/ws/demos/", source=FLOODER, headers=forged(500))
    assert (await extra.recv()).get("code") == "too_many_sockets", how
    await extra.close()
    student = await WS.connect(port, source=STUDENT, headers=forged(999))
    owners = SOCKETS_PER_VISITOR + 1  # the sessions, and the cookie-less sockets as one
    try:
        frames, most_held, socket_of = [], 0, {}
        for n in range(200):
            ws = sockets[n % len(sockets)]
            frames.append(await start(ws, FLOOD, f"f{n}"))
            if frames[-1]["type"] == "accepted":
                socket_of[frames[-1]["run_id"]] = ws
                held = len([r for r in await runs_from(FLOODER) if r.status in ("queued", "running")])
                most_held = max(most_held, held)
        accepted = [f for f in frames if f["type"] == "accepted"]
        refused = {f.get("code") for f in frames if f["type"] == "error"}
        flood = await runs_from(FLOODER)
        # Never more than each person's share at once (runs that finish make room for more of its starts).
        assert most_held <= owners * RUNS_PER_PERSON and SLOTS <= len(accepted) < 100, (how, len(accepted), most_held)
        assert refused <= {"too_many_runs", "rate_limited"}, refused
        assert {r.client for r in flood} == {FLOODER}  # the forged entries named nobody
        assert len({r.owner for r in flood if r.owner.startswith("a:")}) == 1  # cookie-less sockets: one owner

        mine = await start(student, {"prompt": "A student's turn", "max_new_tokens": 4}, "s0")
        assert mine["type"] == "accepted", mine  # the flood holds the queue it may have, not everyone's
        await asyncio.sleep(1.0)  # the student's run is in its address's waiting list; pops in flight are claimed
        flood = await runs_from(FLOODER)
        waiting = {r.pk for r in flood if r.status == "queued"}
        running = [r for r in flood if r.status == "running"]
        assert waiting and running, (how, [r.status for r in flood])  # the student waits behind a full house
        await socket_of[str(running[0].pk)].send({"action": "cancel", "run_id": str(running[0].pk)})  # a slot frees
        deadline = time.monotonic() + 240
        while (run := await sync_to_async(Run.objects.get)(pk=mine["run_id"])).started_at is None:
            assert time.monotonic() < deadline, "the student's run never started"
            await asyncio.sleep(0.05)
        flood = await runs_from(FLOODER)
    finally:
        for ws in [*sockets, student]:
            await ws.close()
    # The freed slot went to the student, not to one of the flood's waiting runs (at most one of those first, if
    # another flood run ended by itself at that moment and the tie went to the earlier address).
    overtook = [r for r in flood if r.pk in waiting and r.started_at and r.started_at < run.started_at]
    assert len(overtook) <= 1, (how, len(overtook))
    freed = min(r.finished_at for r in flood if r.finished_at and r.pk == running[0].pk)
    wait = (run.started_at - freed).total_seconds()
    times = await sync_to_async(lambda: list(RunEvent.objects.filter(run_id=running[0].pk, type="token")
                                             .order_by("seq").values_list("t", flat=True)))()
    step = statistics.median(b - a for a, b in zip(times, times[1:])) if len(times) > 1 else float("nan")
    print(f"[{how}] flood held at most {most_held} runs ({owners} people); student started {wait:.3f} s after the slot freed "
          f"(a step of the flood's runs: {step:.3f} s)")
    assert wait < 15, wait  # generous: the real figure is one scheduling step


async def test_the_dashboard_cap_counts_the_real_address(front, demo_stack):
    how, port = front
    opened = []
    try:
        for i in range(4):  # DEMO_DASHBOARD_SOCKETS_PER_ADDRESS: 4, whatever each one claims to be
            opened.append(await WS.connect(port, path="/ws/demos/dashboard/", source=FLOODER, headers=forged(i)))
            assert (await opened[-1].recv())["type"] == "stats"
        extra = await WS.connect(port, path="/ws/demos/dashboard/", source=FLOODER, headers=forged(77))
        opened.append(extra)
        refused = await extra.recv()
        assert refused["code"] == "too_many_sockets", (how, refused)
        with pytest.raises(ConnectionError):  # and closed
            await extra.recv()
        elsewhere = await WS.connect(port, path="/ws/demos/dashboard/", source=STUDENT, headers=forged(78))
        opened.append(elsewhere)
        assert (await elsewhere.recv())["type"] == "stats"  # another address is not affected
    finally:
        for ws in opened:
            await ws.close()


async def test_wrong_passwords_lock_one_address_out_never_the_account(front, demo_stack, settings):
    how, port = front
    await sync_to_async(User.objects.create_user)("learner", password="learner-pass-123")
    guesser = Browser(port, FLOODER)
    codes = [(await sync_to_async(guesser.sign_in)("learner", "wrong", forged(i)))[0] for i in range(6)]
    assert codes == [200] * 4 + [429, 429], (how, codes)  # rotating the forged address resets nothing
    status, text = await sync_to_async(guesser.sign_in)("learner", "learner-pass-123", forged(50))
    assert status == 429 and "Too many failed sign-ins" in text
    owner = Browser(port, OWNER)
    status, _ = await sync_to_async(owner.sign_in)("learner", "learner-pass-123")
    assert status == 302, (how, status)  # at once, from the account owner's own address
