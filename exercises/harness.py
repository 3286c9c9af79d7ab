"""The test harness that runs inside the sandbox (exercises/sandbox.py passes this file's text to `python -I -S -c`).

Standard library only: the sandbox has the interpreter's stdlib and nothing else. It reads one JSON payload from
stdin (the student's code, the cases to run, a nonce), lowers its own limits, runs each case and writes one record
per event on its saved stdout, each on its own line as `\\n\\x1e<nonce> <json>\\n`; everything else on stdout is
the student's output. It never compares against expected values: it does not have them. The worker grades what
the function returned (exercises/grading.py), so a record forged by the student's code buys nothing a right
answer would not.

Drivers (a case's `call.kind`):
  call    fn(*args, **kwargs) → its return value
  ops     obj = fn(*init); then each [method, args] in `steps` → its return value, or {"raises": ExceptionName}
  repeat  fn called `n` times with arguments made by a seeded generator → {result: count}
"""
import builtins
import io
import json
import os
import random
import resource
import sys
import traceback

SOURCE_NAME = "solution.py"
GOT_LIMIT = 8_000  # characters of one encoded return value; beyond, its repr is cut
PRINT_LIMIT = 32_000  # characters of print() output kept (the rest is dropped here, before it costs a pipe)


class CappedWriter(io.TextIOBase):
    """sys.stdout/stderr for the student's code: keeps the first PRINT_LIMIT characters, drops the rest."""

    def __init__(self, fd):
        self.fd, self.used, self.dropped = fd, 0, 0

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        room = PRINT_LIMIT - self.used
        if room > 0:
            kept = text[:room]
            os.write(self.fd, kept.encode("utf-8", "replace"))
            self.used += len(kept)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)


def emit(fd, nonce, record):
    data = json.dumps(record, allow_nan=True, default=repr)
    os.write(fd, ("\n\x1e" + nonce + " " + data + "\n").encode("utf-8", "replace"))


def encode(value):
    """A JSON-able form of a return value: itself when it is plain data, else {"repr": ...}."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return {"repr": repr(value)[:GOT_LIMIT]}
    if len(text) > GOT_LIMIT:
        return {"repr": text[:GOT_LIMIT] + "…"}
    return json.loads(text)


def describe(exc):
    """The exception as the student should see it: its type, message and the deepest line of their code."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == SOURCE_NAME:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.filename == SOURCE_NAME:
        line = exc.lineno
    return {"type": type(exc).__name__, "message": str(exc)[:500], "line": line}


def draft_args(rng, args):
    """For speculative decoding: p, q fixed; the draft token drawn from q; u and v uniform."""
    p, q = args
    draft = rng.choices(range(len(q)), weights=q)[0]
    return [p, q, draft, rng.random(), rng.random()]


def uniform_last(rng, args):
    """The fixed arguments followed by one uniform number."""
    return [*args, rng.random()]


GENERATORS = {"draft": draft_args, "uniform_last": uniform_last}


def run_case(namespace, call):
    fn = namespace.get(call["fn"])
    if not callable(fn):
        raise NameError(f"your code defines no function or class called {call['fn']!r}")
    kind = call.get("kind", "call")
    if kind == "call":
        return fn(*call.get("args", []), **call.get("kwargs", {}))
    if kind == "ops":
        obj = fn(*call.get("init", []))
        out = []
        for method, args in call["steps"]:
            try:
                out.append(encode(getattr(obj, method)(*args)))
            except Exception as exc:  # the expected outcome of some steps is an exception, named
                out.append({"raises": type(exc).__name__})
        return out
    if kind == "repeat":
        rng, generator, counts = random.Random(call["seed"]), GENERATORS[call["gen"]], {}
        for _ in range(call["n"]):
            result = fn(*generator(rng, call["args"]))
            key = json.dumps(encode(result))
            counts[key] = counts.get(key, 0) + 1
        return counts
    raise ValueError(f"unknown case kind {kind!r}")


def main():
    payload = json.loads(sys.stdin.buffer.read())
    nonce, out_fd = payload["nonce"], os.dup(1)
    # Limits the worker's `prlimit` could not set from outside the namespace (RLIMIT_NPROC counts the outer uid's
    # processes there); hard = soft, so nothing below can raise them back.
    for name, value in payload.get("rlimits", {}).items():
        limit = getattr(resource, name)
        resource.setrlimit(limit, (value, value))
    sys.stdin = io.StringIO("")
    os.close(0)
    emit(out_fd, nonce, {"ready": True})  # before the student's code: no record at all means no sandbox
    sys.stdout = sys.stderr = CappedWriter(1)
    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(payload["code"], SOURCE_NAME, "exec"), namespace)
    except BaseException as exc:  # SyntaxError, or anything the module body raised (SystemExit included)
        emit(out_fd, nonce, {"load_error": describe(exc)})
        emit(out_fd, nonce, {"done": True, "dropped": sys.stdout.dropped})
        return
    for case in payload["cases"]:
        emit(out_fd, nonce, {"start": case["id"]})
        try:
            got = run_case(namespace, case["call"])
        except BaseException as exc:  # noqa: B036 - SystemExit and KeyboardInterrupt are the student's too
            emit(out_fd, nonce, {"case": case["id"], "error": describe(exc)})
            continue
        emit(out_fd, nonce, {"case": case["id"], "got": encode(got)})
    emit(out_fd, nonce, {"done": True, "dropped": sys.stdout.dropped})


if __name__ == "__main__":
    main()
