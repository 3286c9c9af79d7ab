"""The SQLite database holds password hashes and live sessions: owner-only on disk, whatever the umask."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _migrate(db: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "inferencelab.settings",
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", "import os; os.umask(0o022); import django; django.setup(); "
                    "from django.core.management import call_command; call_command('migrate', 'sessions', "
                    "verbosity=0)"], cwd=ROOT, env=env, check=True, timeout=120)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_file_is_created_owner_only(tmp_path):
    db = tmp_path / "db.sqlite3"
    _migrate(db)
    assert _mode(db) == 0o600
    for sidecar in (tmp_path / "db.sqlite3-wal", tmp_path / "db.sqlite3-shm"):
        if sidecar.exists():
            assert _mode(sidecar) & 0o077 == 0, oct(_mode(sidecar))


def test_an_existing_world_readable_database_file_is_narrowed(tmp_path):
    db = tmp_path / "db.sqlite3"
    _migrate(db)
    db.chmod(0o644)
    _migrate(db)  # any process that loads the settings: the server, a worker, a management command
    assert _mode(db) == 0o600
