"""How long after `make run` prints its URL the first demo run completes, on a student's page or an instructor's
preview: a fresh stack (new database, new Redis, the kernels built first as `make run` does), then Chromium opens
the page as soon as the URL appears and presses Run.

    python bench/first_run.py --page preview [--module prefill-decode] [--json out.json]
    python bench/first_run.py --page student

Reported: seconds from the URL line to the run's last frame (`done`, or the error the page shows), the part of it
spent on the page itself (the instructor's login and the editor's preview are part of the path), and when the stack
said "demos ready". Not CI: the figures depend on the machine and on whatever else it runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FINISHED = "(root) => ['done', 'error', 'cancelled'].includes(document.querySelector(root + ' .ilab-demo').dataset.state)"
INSTRUCTOR = ("bench-teacher", "bench-teacher-pass-123")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_env(tmp: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "PORT": str(free_port()), "REDIS_PORT": str(free_port()), "HOST": "127.0.0.1"}
    env.pop("REDIS_URL", None)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the Makefile exports it
    return env


def prepare(env: dict) -> None:
    """What `make run` does before the stack (migrate, the native kernels), plus the course and an instructor."""
    manage = [PY, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*manage, "loadcourse"], env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    user, password = INSTRUCTOR
    subprocess.run([*manage, "shell", "-c",
                    "from django.contrib.auth.models import Group, User\n"
                    f"u = User.objects.create_user({user!r}, password={password!r})\n"
                    "u.groups.add(Group.objects.get(name='instructor'))"], env=env, cwd=ROOT, check=True)
    subprocess.run([PY, "-m", "inference_core.kernels.quant_kernels"], env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


class StackOutput:
    """The stack's output lines, each with the time it arrived; `wait_for` a line containing some text."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc) -> None:
        for line in proc.stdout:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip()))
                self.cond.notify_all()

    def wait_for(self, text: str, timeout: float) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hit = next(((t, line) for t, line in self.lines if text in line), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no line with {text!r} in {timeout:.0f} s:\n" +
                                       "\n".join(line for _, line in self.lines[-30:]))
                self.cond.wait(left)

    def first(self, text: str) -> float | None:
        with self.cond:
            return next((t for t, line in self.lines if text in line), None)


def first_run(page, base: str, which: str, module: str) -> tuple[str, str, float]:
    """Open the page, press Run in its first demo, wait for the run's end: (state, status text, seconds on the page
    before Run was pressed)."""
    t0 = time.monotonic()
    if which == "preview":
        page.goto(f"{base}/accounts/login/?next=/author/{module}/")
        page.get_by_label("Username").fill(INSTRUCTOR[0])
        page.get_by_label("Password").fill(INSTRUCTOR[1])
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"**/author/{module}/")
        root = "#preview"
    else:
        page.goto(f"{base}/modules/{module}/")
        root = "main"
    run = page.locator(f"{root} .ilab-demo").first.get_by_role("button", name="Run", exact=True)
    run.click(timeout=120_000)
    before = time.monotonic() - t0
    page.wait_for_function(FINISHED, arg=root, timeout=600_000)
    demo = page.locator(f"{root} .ilab-demo").first
    status = demo.locator(".ilab-calc__status").first
    return demo.get_attribute("data-state"), status.inner_text() if status.count() else "", before


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--page", choices=("preview", "student"), default="preview")
    p.add_argument("--module", default="prefill-decode", help="a lesson with a live demo")
    p.add_argument("--json", type=Path)
    p.add_argument("--log", type=Path, help="also write the stack's output here, each line with its time after the URL")
    args = p.parse_args(argv)

    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="first-run-"))
    aof = ROOT / "var" / "appendonlydir"  # the stack's Redis keeps its append-only file there: this run's, not kept
    aof_before = aof.exists()
    env = fresh_env(tmp)
    prepare(env)
    proc = subprocess.Popen([PY, str(ROOT / "scripts" / "run_stack.py")], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    out = StackOutput(proc)
    try:
        t_url, _ = out.wait_for("Inference Lab is up", 300)
        base = f"http://127.0.0.1:{env['PORT']}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            state, status, on_page = first_run(page, base, args.page, args.module)
            t_end = time.monotonic()
            browser.close()
        ready = out.first("demos ready:")
        report = {"page": args.page, "module": args.module, "state": state, "status": status,
                  "url_to_done_s": round(t_end - t_url, 1), "url_to_run_pressed_s": round(on_page, 1),
                  "url_to_demos_ready_s": round(ready - t_url, 1) if ready else None,
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_1m": round(os.getloadavg()[0], 2)}
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if not aof_before:
            shutil.rmtree(aof, ignore_errors=True)
    print(f"{args.page} page of {args.module}: first run {report['state']} {report['url_to_done_s']} s after the URL "
          f"appeared (Run pressed at {report['url_to_run_pressed_s']} s; demos ready at "
          f"{report['url_to_demos_ready_s']} s; load {report['load_1m']}). {report['status']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.log:
        args.log.write_text("".join(f"{t - t_url:8.1f}  {line}\n" for t, line in out.lines))
    return 0 if report["state"] == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
