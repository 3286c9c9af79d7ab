"""PostgreSQL via DATABASE_URL: migrations, the course loader, pages and run storage work on it.

A throw-away cluster is created with the machine's `initdb`/`pg_ctl` (PostgreSQL refuses to run as
root, so as `nobody`); Django runs in a subprocess because its database is fixed at settings load.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration

CHECKS = r"""
import django, os
django.setup()
from django.core.management import call_command
from django.test import Client
from courseapp.models import Module
from demos.models import Run, RunEvent
from django.db import connection

assert connection.vendor == "postgresql", connection.vendor
call_command("migrate", verbosity=0)
call_command("loadcourse", verbosity=0)
call_command("loadcourse", verbosity=0)  # idempotent on PostgreSQL too
assert Module.objects.count() >= 12, Module.objects.count()
page = Client().get("/modules/kv-cache/")
assert page.status_code == 200 and b"KV cache" in page.content, page.status_code
run = Run.objects.create(demo="kv-cache", params={"prompt": "hi"}, owner="s:test")
RunEvent.objects.bulk_create([RunEvent(run=run, seq=i, type="token", event={"i": i}) for i in range(5)])
assert list(run.events.filter(seq__gt=1).order_by("seq").values_list("seq", flat=True)) == [2, 3, 4]
print("postgres ok")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres_url():
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed on this machine")
    base = Path(tempfile.mkdtemp(prefix="ilab-pg-"))
    run_as = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    if run_as:
        shutil.chown(base, "nobody")
    data, port = base / "data", free_port()
    subprocess.run([*run_as, initdb, "-D", str(data), "-A", "trust", "-U", "lab"], check=True, capture_output=True)
    subprocess.run([*run_as, pg_ctl, "-D", str(data), "-w", "-l", str(base / "log"), "-o",
                    f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "start"], check=True, capture_output=True)
    try:
        yield f"postgres://lab@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_the_app_runs_on_postgresql(postgres_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": postgres_url, "DJANGO_SETTINGS_MODULE": "inferencelab.settings",
           "MEDIA_ROOT": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", CHECKS], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "postgres ok" in out.stdout
