"""One settings mechanism for the web side (issue 27): the environment is parsed once, by settings.py through
inferencelab/env.py (one parser per type, one true/false parser), and code reads `django.conf.settings`."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from inferencelab.env import parse_bool

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("demos", "courseapp", "authoring", "narration", "search", "serverprofile", "inferencelab", "workers")


def django_process(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DEMO_", "MACHINE_PROFILE"))}
    environment.update(env, DJANGO_SETTINGS_MODULE="inferencelab.settings")
    return subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", " yes ", "on", True])
def test_true_words(raw):
    assert parse_bool(raw) is True


@pytest.mark.parametrize("raw", ["0", "false", "No", "off", "", False])
def test_false_words(raw):
    assert parse_bool(raw) is False


def test_an_unknown_flag_word_is_an_error_naming_the_variable():
    with pytest.raises(ImproperlyConfigured, match="DEMO_REPLAY_CACHE='maybe'"):
        parse_bool("maybe", "DEMO_REPLAY_CACHE")


def test_a_process_reads_its_knobs_once_typed_and_refuses_to_start_on_a_bad_value():
    shown = django_process("from django.conf import settings as s; import os; os.environ['DEMO_MAX_QUEUED'] = '9'; "
                           "print(repr((s.DEMO_MAX_QUEUED, s.DEMO_HEARTBEAT_TTL, s.DEMO_REPLAY_CACHE, "
                           "s.MACHINE_PROFILE_QUICK)))",
                           DEMO_MAX_QUEUED="7", DEMO_HEARTBEAT_TTL="2.5", DEMO_REPLAY_CACHE="off",
                           MACHINE_PROFILE_QUICK="yes")
    assert shown.stdout.strip() == "(7, 2.5, False, True)", shown.stderr  # set after start: not read again
    for name, value in (("DEMO_REPLAY_CACHE", "maybe"), ("DEMO_MAX_QUEUED", "lots"), ("DJANGO_DEBUG", "sure")):
        refused = django_process("pass", **{name: value})
        assert refused.returncode != 0 and f"{name}={value!r}" in refused.stderr, refused.stderr[-2000:]


def _reads_the_environment(tree: ast.AST) -> list[int]:
    """Lines that read os.environ / os.getenv (os.environ.setdefault, which bootstraps a process, is a write)."""
    writes = {id(node.func.value) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault"}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
            and getattr(node.value, "id", "") == "os" and id(node) not in writes]


def test_only_the_env_module_reads_the_environment_and_only_it_parses_true_false():
    readers, parsers = [], []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or path == ROOT / "inferencelab" / "env.py":
                continue
            tree = ast.parse(path.read_text())
            if _reads_the_environment(tree):
                readers.append(str(path.relative_to(ROOT)))
            for node in ast.walk(tree):  # a setting with a fallback of its own: a second place for its default
                if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) == 3
                        and getattr(node.args[0], "id", "") == "settings"):
                    readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            for node in ast.walk(tree):
                if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and {"true", "yes"} <= {
                        getattr(e, "value", None) for e in node.elts}:
                    parsers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == [] and parsers == []
    assert not (ROOT / "demos" / "conf.py").exists()
