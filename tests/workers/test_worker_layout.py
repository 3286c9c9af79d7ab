"""The worker side lives in workers/ and the web side never imports it (issue 27): read from the source, with an
ast walk that sees function-local imports too."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB_SIDE = ("demos", "courseapp", "authoring", "narration", "search", "serverprofile", "inferencelab")
CELERY_WORKER_HOOKS = ("worker_ready", "worker_shutting_down", "worker_process_init", "celeryd_init", "shared_task")


def modules(*packages: str):
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path, ast.parse(path.read_text(), str(path))


def imported(tree: ast.AST) -> set[str]:
    """Every module an import in `tree` names, at any depth (function-local imports included)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_the_web_side_never_imports_the_worker_package():
    offenders = [str(path.relative_to(ROOT)) for path, tree in modules(*WEB_SIDE)
                 if any(name == "workers" or name.startswith("workers.") for name in imported(tree))]
    assert offenders == []


def test_every_celery_task_and_worker_hook_is_in_workers():
    """No task, no worker signal receiver outside workers/: the demos app is the web side only."""
    offenders = []
    for path, tree in modules(*WEB_SIDE):
        for node in ast.walk(tree):
            for decorator in getattr(node, "decorator_list", []):
                text = ast.unparse(decorator)
                if text.endswith((".task", ".connect")) or ".task(" in text or any(
                        text.startswith(hook) for hook in CELERY_WORKER_HOOKS):
                    offenders.append(f"{path.relative_to(ROOT)}: @{text}")
    assert offenders == []
    assert not (ROOT / "demos" / "tasks.py").exists() and not (ROOT / "serverprofile" / "worker.py").exists()


def test_the_task_names_senders_and_routes_agree(settings):
    from narration.jobs import CONVERT_TASK, GENERATE_TASK
    from demos.admission import RUN_DEMO_TASK
    from workers.narration import convert_narration, generate_narration
    from workers.tasks import run_demo

    assert run_demo.name == RUN_DEMO_TASK == "demos.tasks.run_demo"  # tickets queued before the move still run
    assert settings.CELERY_TASK_ROUTES[RUN_DEMO_TASK] == {"queue": settings.DEMO_TASK_QUEUE}
    assert (generate_narration.name, convert_narration.name) == (GENERATE_TASK, CONVERT_TASK)
    from inferencelab.celery import app

    app.loader.import_default_modules()  # what a worker does at start: autodiscovery finds workers.tasks
    assert {RUN_DEMO_TASK, GENERATE_TASK, CONVERT_TASK} <= set(app.tasks)


def test_admission_policy_is_one_module_that_the_consumer_and_the_worker_call():
    task = imported(ast.parse((ROOT / "workers" / "tasks.py").read_text()))
    assert "demos.admission" in task and "demos.admission.next_run" in task
    source = (ROOT / "demos" / "consumers" / "runs.py").read_text()
    assert "from ..admission import" in source and "limit_hit" not in source and "fair_pop" not in source
    defined = {node.name: path.relative_to(ROOT) for path, tree in modules("demos", "workers")
               for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for name in ("limit_hit", "worker_slots", "has_free_slot", "running_counts", "next_run", "admit", "enqueue"):
        assert str(defined[name]) == "demos/admission.py", name


def test_the_live_demo_stack_fixture_is_defined_once():
    """One `live_stack` (tests/conftest.py) for every test module that needs the real stack."""
    defined = [str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and node.name == "live_stack"]
    assert defined == ["tests/conftest.py"]
