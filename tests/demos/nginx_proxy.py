"""A real nginx (the Debian package) in front of a test Daphne, as docs/deploy.md prescribes.

Started as a non-daemon child with a throw-away prefix (its own temp dirs, pid and logs), listening on a free
port and proxying HTTP and websockets with `proxy_set_header X-Forwarded-For $remote_addr;`: the one entry
Daphne trusts with TRUSTED_PROXIES=1 is the address nginx saw.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from demo_stack import _wait_port, free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
MISSING = "nginx is not installed (`make test` installs it with apt-get when run as root: apt-get install nginx)"

CONFIG = """
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
}}
"""


class Nginx:
    def __init__(self, workdir: Path, upstream: int):
        self.prefix = Path(workdir)
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.prefix / "nginx.conf"
        conf.write_text(CONFIG.format(prefix=self.prefix, port=self.port, upstream=upstream))
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
