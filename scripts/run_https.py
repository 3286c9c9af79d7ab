#!/usr/bin/env python3
"""`make run-https`: the stack behind nginx with TLS on this machine, to try LTI with an LMS (which wants HTTPS
URLs and `SameSite=None; Secure` cookies) or anything else that needs `https://`.

- A self-signed certificate for localhost and 127.0.0.1 (plus TLS_HOSTNAMES, comma-separated) is made once under
  `var/tls/` (a new one when the names change); a browser asks once to accept it, an LMS on this machine must be
  told to trust it (or to skip verification in development).
- nginx (the Debian package) listens on HTTPS_HOST:HTTPS_PORT (127.0.0.1:8443) and forwards to Daphne as
  docs/deploy.md's block does: `Host $http_host` (the port the browser used, kept: `$host` drops it, so absolute
  URLs such as the LTI redirect URI would point at port 443), `X-Forwarded-Proto $scheme`, `X-Forwarded-For
  $remote_addr`, websockets upgraded. Static files come through Daphne (WhiteNoise), as with `make run`: no
  collectstatic, so a file edited since is never shadowed by an old copy.
- The application is told it is behind that proxy: DJANGO_BEHIND_PROXY=1, DJANGO_HTTPS=1 (secure cookies),
  TRUSTED_PROXIES=1, the HTTPS origin trusted for CSRF, and no HSTS (a browser would pin it for `localhost`).
- `--app stack` (the default) is `make run`'s whole stack (scripts/run_stack.py: Redis, workers, Daphne on PORT,
  8000); `--app daphne` serves the pages alone (no demos run), quick to start.

Ctrl-C stops nginx and the stack. Everything nginx writes stays under `var/nginx-https/` (RUN_HTTPS_DIR moves
`var/` for the certificate and nginx's files, as tests/lti/test_local_https.py does).
"""
from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
NGINX_CONF = """daemon off;
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
        listen {listen} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""


def log(message: str) -> None:
    print(f"[run-https] {message}", flush=True)


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        sys.exit("nginx is not installed: apt-get install nginx (the Debian package), then run this again.")
    return found


def certificate(folder: Path, names: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate for `names` (DNS names or IP addresses), made once and kept in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path, names_path = folder / "localhost.crt", folder / "localhost.key", folder / "names"
    if cert_path.exists() and key_path.exists() and names_path.exists() and names_path.read_text() == ",".join(names):
        return cert_path, key_path
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    alternatives = []
    for name in names:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    names_path.write_text(",".join(names))
    log(f"made a self-signed certificate for {', '.join(names)}: {cert_path}")
    return cert_path, key_path


def wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with status {proc.returncode}")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"{what} did not listen on port {port} within {timeout:.0f} s")


def app_environment(public: list[str]) -> dict:
    env = dict(os.environ)
    origins = [origin for origin in env.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if origin]
    env.update({"DJANGO_BEHIND_PROXY": "1", "DJANGO_HTTPS": "1", "DJANGO_HSTS_SECONDS": "0",
                "DJANGO_HSTS_PRELOAD": "0", "TRUSTED_PROXIES": "1",
                "DJANGO_CSRF_TRUSTED_ORIGINS": ",".join(origins + public)})
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=["stack", "daphne"], default="stack",
                        help="the whole stack (make run's) or Daphne alone (pages only, no demo runs)")
    args = parser.parse_args()
    https_host, https_port = os.environ.get("HTTPS_HOST", "127.0.0.1"), int(os.environ.get("HTTPS_PORT", "8443"))
    port = int(os.environ.get("PORT", "8000"))
    names = ["localhost", "127.0.0.1"] + [n for n in os.environ.get("TLS_HOSTNAMES", "").split(",") if n]
    public = [f"https://{name}:{https_port}" for name in names]
    env = app_environment(public)
    env.update({"HOST": "127.0.0.1", "PORT": str(port)})
    nginx = nginx_binary()
    work = Path(os.environ.get("RUN_HTTPS_DIR") or VAR)
    cert, key = certificate(work / "tls", names)
    prefix = work / "nginx-https"
    prefix.mkdir(parents=True, exist_ok=True)
    conf = NGINX_CONF.format(prefix=prefix, listen=f"{https_host}:{https_port}", cert=cert, key=key, upstream=port)
    (prefix / "nginx.conf").write_text(conf)

    if args.app == "stack":
        app_argv = [sys.executable, str(ROOT / "scripts" / "run_stack.py")]
    else:
        app_argv = [sys.executable, "-m", "inferencelab.server", "-b", "127.0.0.1", "-p", str(port),
                    "inferencelab.asgi:application"]
    children: list[subprocess.Popen] = []

    def stop(*_ignored) -> None:
        for child in reversed(children):
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        app = subprocess.Popen(app_argv, cwd=ROOT, env=env, start_new_session=True)
        children.append(app)
        wait_port(port, app, 600, "the stack" if args.app == "stack" else "Daphne")
        proxy = subprocess.Popen([nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"),
                                  "-e", str(prefix / "error.log")], cwd=ROOT, start_new_session=True)
        children.append(proxy)
        wait_port(https_port, proxy, 20, "nginx")
        log(f"Inference Lab over TLS: {public[0]}/  (LTI tool URLs: {public[0]}/lti/login/, /lti/launch/, "
            f"/lti/jwks/; Ctrl-C stops)")
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        return 1  # a child died on its own
    except KeyboardInterrupt:
        return 0
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
