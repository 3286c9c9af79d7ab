"""A whole lab in the browser, on the quantization lesson: every configuration run live (a queued row says so),
the table and chart filled from the student's own runs, one answer right and one wrong, graded against those runs,
the answers back after a reload, and a submission scored.

The page's demo socket is answered by a stand-in for the consumer and worker (no Redis, no engine): each `start`
becomes the student's own `Run`, owned as the consumer owns it, with the `quant_summary` event a worker stores,
carrying made-up figures; so the table the page reads back is built from stored runs exactly as in production."""
from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from demos.models import Run, RunEvent
from demos.registry import validate
from labs.models import LabAttempt

pytestmark = pytest.mark.browser

# Per format, each run's (quantized, fp32) decode tokens/s, in the order the runs are made, and its weight bytes.
FIGURES = {"int4-g128": [(190.0, 46.0), (170.0, 44.0), (200.0, 48.0)],
           "int8": [(140.0, 47.0), (135.0, 45.0), (150.0, 46.0)],
           "nf4": [(80.0, 45.0), (78.0, 46.0), (85.0, 47.0)]}
BYTES = {"int4-g128": 71_800_000, "int8": 135_300_000, "nf4": 75_600_000}
LAB = "#lab-four-formats"


class LabWorker:
    """Answers `start`s as the consumer and a worker would; with `hold` set, the next run waits in the queue until
    `release()`."""

    def __init__(self, user: User):
        self.user, self.starts, self.hold, self.held = user, [], False, None
        self.figures = {fmt: list(runs) for fmt, runs in FIGURES.items()}

    def __call__(self, ws) -> None:
        ws.on_message(lambda message: self.answer(ws, json.loads(message)))

    def answer(self, ws, message: dict) -> None:
        if message.get("action") == "ping":
            ws.send(json.dumps({"type": "pong", "t": 0}))
        if message.get("action") != "start":
            return
        self.starts.append(message)
        run_id = str(uuid.uuid4())
        ws.send(json.dumps({"type": "accepted", "run_id": run_id, "demo": message["demo"], "ref": message.get("ref"),
                            "params": message["params"], "mode": "live", "share_id": run_id[:8]}))
        if self.hold:
            self.hold, self.held = False, (ws, message, run_id)
            ws.send(json.dumps({"type": "queued", "run_id": run_id, "position": 2, "ahead": 1, "eta_s": 12.0}))
            return
        self.finish(ws, message, run_id)

    def release(self) -> None:
        (ws, message, run_id), self.held = self.held, None
        self.finish(ws, message, run_id)

    def finish(self, ws, message: dict, run_id: str) -> None:
        params = validate(message["demo"], message["params"])
        fmt = params["format"]
        quant, fp32 = self.figures[fmt].pop(0)
        now = timezone.now()
        run = Run.objects.create(id=uuid.UUID(run_id), demo=message["demo"], params=params, status=Run.Status.DONE,
                                 owner=f"u:{self.user.pk}", user=self.user, device="cpu", dtype="float32",
                                 engine_version="0123456789abcdef", model="smollm2-135m", started_at=now,
                                 finished_at=now, n_events=1)
        summary = {"type": "quant_summary", "format": fmt, "kernels": [], "fp32_matmul_bytes": 537_900_000,
                   "quant_matmul_bytes": BYTES[fmt], "fp32_decode_tokens_per_s": fp32,
                   "quant_decode_tokens_per_s": quant, "n_generated": 8, "first_divergence": -1, "agreement": 1.0,
                   "fp32_text": "", "quant_text": ""}
        RunEvent.objects.create(run=run, seq=0, type="quant_summary", event=summary)
        ws.send(json.dumps({**run.header(), "type": "header"}))
        ws.send(json.dumps({"type": "event", "run_id": run_id, "seq": 0, "event": summary}))
        ws.send(json.dumps({"type": "done", "run_id": run_id, "status": "done", "summary": {}}))


def row(page, config: str):
    return page.locator(f'{LAB} tr[data-config="{config}"]')


def run_row(page, config: str, label: str, runs_after: int) -> None:
    page.get_by_role("button", name=f"Run {label} again" if runs_after > 1 else f"Run {label}").click()
    expect(row(page, config).locator('td[data-cell="runs"]')).to_have_text(f"{runs_after} of 3")


def test_a_whole_lab_live_graded_against_the_students_runs_and_resumed(real_course, chromium):
    student = User.objects.create_user("lab-student", password="lab-pass-12345")
    worker = LabWorker(student)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.route_web_socket("**/ws/demos/", worker)
    page.goto(f"{real_course}/accounts/login/?next=/modules/quantization/")
    page.get_by_label("Username").fill("lab-student")
    page.get_by_label("Password").fill("lab-pass-12345")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/modules/quantization/")
    lab = page.locator(LAB)
    expect(lab.locator("caption")).to_contain_text("Your runs: decode tokens per second")
    submit = lab.get_by_role("button", name="Submit the lab")
    expect(submit).to_be_disabled()

    # The first run waits in the queue, and its row says so; once it runs, it fills fp32 and int4 alike.
    worker.hold = True
    page.get_by_role("button", name="Run fp32").click()
    expect(row(page, "fp32").locator(".ilab-lab__row-status")).to_have_text("Queued: 2nd in line, about 12 s")
    expect(lab.locator(".ilab-lab__status")).to_have_text("fp32: Queued: 2nd in line, about 12 s.")
    expect(page.get_by_role("button", name="Run fp32")).to_be_disabled()
    worker.release()
    expect(row(page, "fp32").locator('td[data-cell="runs"]')).to_have_text("1 of 3")
    expect(row(page, "int4-g128").locator('td[data-cell="runs"]')).to_have_text("1 of 3")
    for n in (2, 3):
        run_row(page, "int4-g128", "int4, groups of 128", n)
    for config, label in (("int8", "int8"), ("nf4", "NF4")):
        for n in (1, 2, 3):
            run_row(page, config, label, n)
    assert all(start.get("live") is True and not start.get("replay") for start in worker.starts)
    assert len(worker.starts) == 9 and not any(worker.figures.values())

    # The table and the chart are the student's runs: medians and spreads, with what measured them.
    expect(row(page, "int4-g128").locator('td[data-cell="median"]')).to_have_text("190")
    expect(row(page, "int4-g128").locator('td[data-cell="spread"]')).to_have_text("170–200")
    expect(row(page, "fp32").locator('td[data-cell="median"]')).to_have_text("46.0")
    expect(row(page, "nf4").locator('td[data-cell="setup"]')).to_have_text("cpu · float32 · engine 01234567")
    expect(lab.locator(".ilab-lab__chart .main-svg").first).to_be_attached()
    expect(lab.locator(".ilab-lab__chart")).to_have_attribute("aria-label", (
        "Median decode tokens per second of your runs: fp32 46.0 tok/s (44.0–48.0, 3 runs); int8 140 tok/s "
        "(135–150, 3 runs); int4, groups of 128 190 tok/s (170–200, 3 runs); NF4 80.0 tok/s (78.0–85.0, 3 runs)."))
    expect(submit).to_be_enabled()

    # One answer right (190 / 46 = 4.13; the runs allow 3.54 to 4.55), one wrong (int4 reads fewer bytes than NF4).
    lab.get_by_label("How many times faster than fp32").fill("4.1")
    lab.get_by_role("group", name="Which configuration reads the fewest").get_by_label("NF4").check()
    lab.get_by_label("What moved between the four rows").fill("int4 read fewer bytes than fp32, so it ran faster.")
    lab.get_by_role("button", name="Check my answers").click()
    speedup = lab.locator('[data-question="int4-speedup"] .ilab-lab__feedback')
    expect(speedup).to_contain_text("✓ Your int4, groups of 128 median, 190 tok/s, over fp32's 46.0 tok/s is 4.13×; "
                                    "your runs allow 3.54–4.55×")
    expect(speedup).to_have_class("ilab-lab__feedback is-right")
    fewest = lab.locator('[data-question="fewest-bytes"] .ilab-lab__feedback')
    expect(fewest).to_contain_text("✗ int4, groups of 128 has the lowest weight bytes read per token in your runs: "
                                   "71.8 MB")
    expect(fewest).to_contain_text("Not quite: you chose NF4, 75.6 MB.")

    # Saved as they go (the form keeps nothing itself: autocomplete is off): after a reload the answers are back.
    expect(lab.locator(".ilab-lab__status")).to_have_text("Answers saved and checked against your runs.")
    assert LabAttempt.objects.get(user=student).answers["fewest-bytes"] == "nf4"
    page.reload()
    expect(lab.get_by_label("How many times faster than fp32")).to_have_value("4.1")
    expect(lab.get_by_role("group", name="Which configuration reads the fewest").get_by_label("NF4")).to_be_checked()
    expect(lab.get_by_label("What moved between the four rows")).to_have_value(
        "int4 read fewer bytes than fp32, so it ran faster.")
    expect(row(page, "int8").locator('td[data-cell="runs"]')).to_have_text("3 of 3")

    lab.get_by_role("button", name="Submit the lab").click()
    expect(lab.locator(".ilab-lab__score")).to_have_text("Submitted. Score: 50 % of the graded questions right.")
    expect(lab.get_by_label("How many times faster than fp32")).to_be_disabled()
    attempt = LabAttempt.objects.get(user=student, lab_key="four-formats")
    assert attempt.score == 0.5 and attempt.answers["what-moved"].startswith("int4 read fewer bytes")
    assert errors == []
    context.close()
