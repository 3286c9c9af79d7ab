"""This install's Redis password: `var/redis_password` (random, mode 0600), made once by `make run`.

`scripts/run_stack.py` creates the file (`python -m inferencelab.redis_auth`) and starts its redis-server with
that password; settings build the default REDIS_URL from it, so the Celery broker, the Channels layer and every
Redis helper authenticate without the password ever appearing in an environment or a command line. An explicit
REDIS_URL always wins (a production Redis, the test stacks). Without the file the default URL has no password:
a process started before any `make run` talks to a Redis that has none.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .secret_key import ensure_key_file

PASSWORD_FILE = Path(__file__).resolve().parent.parent / "var" / "redis_password"


def password(path: Path = PASSWORD_FILE) -> str:
    """The password, or "" when this install has none yet."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def local_url(port: int, path: Path = PASSWORD_FILE) -> str:
    """The URL of the Redis `make run` starts on this machine (token_urlsafe: nothing to quote)."""
    secret = password(path)
    return f"redis://{':' + secret + '@' if secret else ''}127.0.0.1:{port}/0"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PASSWORD_FILE
    print(f"{'created' if ensure_key_file(target) else 'kept'} {target}")
