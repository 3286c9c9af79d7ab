"""The harness of a live run's sandbox (exercises/live_session.py passes this file's text to `python -I -S -c`).

Standard library only, like exercises/harness.py, whose record framing it shares: each record is written on the
saved stdout as `\\n\\x1e<nonce> <json>\\n`, and anything else there is the student's output. Unlike that harness it
stays up for a whole run: it reads one JSON line (the code, the function's name, the nonce, the rlimits), loads the
code once, then answers each further line (`{"args": [...]}`, one per generated token) with one record,
`{"got": value}` or `{"error": {...}}`, until its stdin closes. The worker checks every answer: the harness only
calls the function.
"""
import builtins
import io
import json
import os
import resource
import sys
import traceback

SOURCE_NAME = "solution.py"
PRINT_LIMIT = 32_000  # characters of print() output kept over the whole run


class CappedWriter(io.TextIOBase):
    def __init__(self, fd):
        self.fd, self.used = fd, 0

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        room = PRINT_LIMIT - self.used
        if room > 0:
            kept = text[:room]
            os.write(self.fd, kept.encode("utf-8", "replace"))
            self.used += len(kept)
        return len(text)


def emit(fd, nonce, record):
    os.write(fd, ("\n\x1e" + nonce + " " + json.dumps(record, allow_nan=True, default=repr) + "\n").encode(
        "utf-8", "replace"))


def describe(exc):
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == SOURCE_NAME:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.filename == SOURCE_NAME:
        line = exc.lineno
    return {"type": type(exc).__name__, "message": str(exc)[:500], "line": line}


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def encode(value):
    """The answer as JSON can carry it: an int, or a list of at most 64 ints, stays as it is; anything else is named
    by its type and repr."""
    if is_int(value) or (isinstance(value, list) and len(value) <= 64 and all(is_int(v) for v in value)):
        return value
    return {"type": type(value).__name__, "repr": repr(value)[:200]}


def main():
    requests = io.TextIOWrapper(os.fdopen(0, "rb", buffering=0), encoding="utf-8")
    setup = json.loads(requests.readline())
    nonce, out_fd = setup["nonce"], os.dup(1)
    for name, value in setup.get("rlimits", {}).items():
        limit = getattr(resource, name)
        resource.setrlimit(limit, (value, value))
    sys.stdin = io.StringIO("")
    emit(out_fd, nonce, {"ready": True})
    sys.stdout = sys.stderr = CappedWriter(1)
    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(setup["code"], SOURCE_NAME, "exec"), namespace)
        fn = namespace.get(setup["fn"])
        if not callable(fn):
            raise NameError(f"your code defines no function called {setup['fn']!r}")
    except BaseException as exc:  # noqa: B036 - SystemExit too: the student's
        emit(out_fd, nonce, {"load_error": describe(exc)})
        return
    emit(out_fd, nonce, {"loaded": True})
    for line in requests:
        args = json.loads(line)["args"]
        try:
            emit(out_fd, nonce, {"got": encode(fn(*args))})
        except BaseException as exc:  # noqa: B036
            emit(out_fd, nonce, {"error": describe(exc)})


if __name__ == "__main__":
    main()
