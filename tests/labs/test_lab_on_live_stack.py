"""The quantization lab on the real stack (Daphne, Redis, a Celery worker running the real engine: tests/conftest.py's
`live_stack`), beyond the browser stand-in: a signed-in student runs the lab's configurations over a real websocket
as the lab's page does, the lab's table (over HTTP from Daphne) is built from those runs, and their answers are
graded against it: the speed-up read off their own table right, a wrong "fewest bytes" choice wrong, then submitted.

As small as the lab format allows: the course's quantization lab cut to its fp32 and int4 rows (the fewest
configurations a lab accepts, and both measured by the same run: fp32 is the int4 run's reference side) and one
repeat (the fewest), so one live run fills the table."""
from __future__ import annotations

import asyncio
import http.client
import json
import sys
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User

from courseapp.loader import load_course
from labs.definition import MIN_CONFIGS, MIN_REPEATS
from labs.models import Lab

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from test_demos_scaleout import WS  # noqa: E402
from wire import Browser  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
COURSE_LAB = Path(__file__).resolve().parents[2] / "content" / "quantization.md"
KEPT = ("fp32", "int4-g128")
PBKDF2 = PBKDF2PasswordHasher()


def smallest_quantization_lab() -> dict:
    """content/quantization.md's lab with only the rows in KEPT, the fewest repeats, and the questions about them."""
    text = COURSE_LAB.read_text()
    props = json.loads(text.split(":::{lab} four-formats\n", 1)[1].split("\n:::", 1)[0])
    props["configs"] = [c for c in props["configs"] if c["id"] in KEPT]
    props["repeats"] = MIN_REPEATS
    props["questions"] = [q for q in props["questions"] if q["kind"] != "ratio" or {q["of"], q["over"]} <= set(KEPT)]
    assert len(props["configs"]) == MIN_CONFIGS and {q["kind"] for q in props["questions"]} >= {"ratio", "argmin"}
    return props


def call(browser: Browser, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """JSON over real HTTP with the browser's cookies and CSRF token, as lab.js sends it."""
    conn = http.client.HTTPConnection("127.0.0.1", browser.port, timeout=60)
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in browser.cookies.items()),
               "X-CSRFToken": browser.cookies.get("csrftoken", ""), "Content-Type": "application/json",
               "Origin": f"http://127.0.0.1:{browser.port}", "Referer": f"http://127.0.0.1:{browser.port}/"}
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def run_live(port: int, cookie: bytes, demo: str, params: dict) -> dict:
    """Start one live run as the lab's row button does; its final frame."""
    ws = await WS.connect(port, cookie=cookie)
    try:
        await ws.send({"action": "start", "demo": demo, "live": True, "ref": "lab", "params": params})
        while True:
            frame = await ws.recv(timeout=300)
            if frame["type"] in ("done", "error"):
                return frame
    finally:
        await ws.close()


@pytest.mark.django_db(transaction=True)
def test_the_quantization_lab_runs_on_the_worker_and_grades_from_those_runs(live_stack, content_dir):
    path = content_dir / "cache.md"
    path.write_text(path.read_text() + "\n:::{lab} formats\n" + json.dumps(smallest_quantization_lab()) + "\n:::\n")
    load_course(content_dir)
    lab = Lab.objects.get(module__slug="cache", key="formats").definition
    # Hashed as Daphne's settings hash (this process's tests use a fast hasher Daphne does not know).
    User.objects.create(username="labber", password=PBKDF2.encode("labber-pass-123", PBKDF2.salt()))
    browser = Browser(live_stack.http_port, "127.0.0.1")
    assert browser.sign_in("labber", "labber-pass-123")[0] == 302
    assert 'id="lab-formats"' in browser.request("GET", "/modules/cache/")[2]
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items()).encode()

    status, before = call(browser, "GET", "/labs/cache/formats/table")
    assert status == 200 and not before["table"]["complete"]
    for params in {json.dumps(c["params"], sort_keys=True) for c in lab["configs"]}:  # rows sharing runs run once
        final = asyncio.run(run_live(live_stack.http_port, cookie, lab["demo"], json.loads(params)))
        assert final["type"] == "done", (final, live_stack.log(live_stack.worker)[-3000:])

    status, state = call(browser, "GET", "/labs/cache/formats/table")
    table = state["table"]
    assert status == 200 and table["complete"], table
    rows = {row["id"]: row for row in table["rows"]}
    assert all(row["runs"] == 1 and row["device"] and row["engine_version"] for row in rows.values())
    assert rows["fp32"]["run_ids"] == rows["int4-g128"]["run_ids"]  # one run measured both sides
    ratio = next(q for q in lab["questions"] if q["kind"] == "ratio")
    metric = ratio["metric"]
    speedup = rows[ratio["of"]]["stats"][metric]["median"] / rows[ratio["over"]]["stats"][metric]["median"]
    fewest = next(q for q in lab["questions"] if q["kind"] == "argmin")
    answers = {ratio["id"]: f"{speedup:.2f}", fewest["id"]: "fp32"}  # fp32 reads the most bytes of the two

    status, checked = call(browser, "POST", "/labs/cache/formats/answers", {"answers": answers})
    feedback = checked["attempt"]["feedback"]
    assert status == 200 and feedback[ratio["id"]]["correct"] is True, feedback
    assert feedback[fewest["id"]]["correct"] is False and "int4" in feedback[fewest["id"]]["message"], feedback
    status, submitted = call(browser, "POST", "/labs/cache/formats/submit", {"answers": answers})
    assert status == 200 and submitted["attempt"]["submitted_at"] and submitted["attempt"]["score"] == 0.5
