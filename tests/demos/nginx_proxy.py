"""A real nginx (the Debian package) in front of a test Daphne, as docs/deploy.md prescribes.

Started as a non-daemon child with a throw-away prefix (its own temp dirs, pid and logs), listening on a free
port and proxying HTTP and websockets with `proxy_set_header X-Forwarded-For $remote_addr;`: the one entry
Daphne trusts with TRUSTED_PROXIES=1 is the address nginx saw.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from demo_stack import _wait_port, free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
MISSING = "nginx is not installed (`make test` installs it with apt-get when run as root: apt-get install nginx)"

HEAD = """
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{body}
}}
"""
PROXY = """
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_read_timeout 1h;
        }}
    }}
"""
DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
NGINX_BLOCK = re.compile(r"```nginx\n(upstream daphne .*?)```", re.S)


def deploy_block(port: int, upstream: int, media_root: Path, static_root: Path) -> str:
    """docs/deploy.md's nginx block as written, with only its machine-specific parts put to this test's: the
    listen line (no TLS here), the upstream's ports and the two folders. Each must be found, so a doc that changes
    them fails here instead of silently testing something else."""
    block = NGINX_BLOCK.search(DEPLOY_DOC.read_text()).group(1)
    for pattern, value in ((r"listen 443 ssl http2;", f"listen 127.0.0.1:{port};"),
                           (r"upstream daphne \{[^}]*\}", f"upstream daphne {{ server 127.0.0.1:{upstream}; }}"),
                           (r"/srv/inference-lab/var/media/", f"{media_root}/"),
                           (r"/srv/inference-lab/var/staticfiles/", f"{static_root}/")):
        block, found = re.subn(pattern, lambda _: value, block)
        assert found, f"docs/deploy.md's nginx block no longer has {pattern!r}"
    assert "/srv/" not in block, block
    return block


class Nginx:
    """nginx listening on a free port: a plain proxy to `upstream`, or, with `server` (a function of that port),
    the http-level text it returns (upstream and server blocks, e.g. `deploy_block`'s)."""

    def __init__(self, workdir: Path, upstream: int, server=None):
        self.prefix = Path(workdir)
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.prefix / "nginx.conf"
        body = server(self.port) if server else PROXY.format(port=self.port, upstream=upstream)
        conf.write_text(HEAD.format(prefix=self.prefix, body=body))
        log = self.prefix / "stdout.log"
        self.proc = subprocess.Popen([NGINX, "-p", str(self.prefix), "-c", str(conf), "-e", str(self.prefix / "error.log")],
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait_port(self.port, self.proc, 20, "nginx", self.prefix / "error.log")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
