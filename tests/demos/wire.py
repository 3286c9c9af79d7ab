"""Real HTTP from a chosen source address, for tests through a real proxy or Daphne (websockets: the WS client
of test_demos_scaleout, which takes a `source` too).

Linux routes all of 127.0.0.0/8 to loopback, so binding the client socket to 127.0.0.2, 127.0.0.3, … gives
each test client its own real address, as distinct visitors have.
"""
from __future__ import annotations

import http.client
import urllib.parse


class Browser:
    """HTTP from one source address with a cookie jar (what a sign-in form needs: the CSRF cookie and token)."""

    def __init__(self, port: int, source: str, headers: dict | None = None):
        self.port, self.source, self.headers, self.cookies = port, source, headers or {}, {}

    def request(self, method: str, path: str, form: dict | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(self.source, 0))
        body = urllib.parse.urlencode(form) if form is not None else None
        sent = {**self.headers, **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                self.cookies[key.strip()] = rest.split(";", 1)[0]
        return response.status, dict(response.getheaders()), text

    def sign_in(self, username: str, password: str, headers: dict | None = None) -> tuple[int, str]:
        self.request("GET", "/accounts/login/", headers=headers)
        status, _, text = self.request("POST", "/accounts/login/", {
            "username": username, "password": password, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")},
            headers=headers)
        return status, text
