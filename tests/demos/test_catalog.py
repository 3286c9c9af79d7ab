"""One spec per demo, owned by the demos app (issue 15): `demos/catalog/<name>.py` holds the demo's spec and runner,
the page embeds that spec, the demo's script reads its defaults and limits from it, and the engine keeps no course
code. No model, no Redis: plain units."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from demos import catalog
from demos.catalog import DEMOS
from demos.registry import DemoParamError, validate

ROOT = Path(__file__).resolve().parents[2]
DEMO_SCRIPTS = sorted(spec.module for spec in DEMOS.values())


def _embedded_config(html: str) -> dict:
    return json.loads(html.split('class="ilab-demo__config">')[1].split("</script>")[0])


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_the_pages_embedded_spec_is_the_catalogs(client, name):
    """The standalone demo page embeds exactly the catalog's spec, and its starting params are the spec's
    defaults: the script has nothing else to read a default or a limit from."""
    spec = DEMOS[name]
    page = client.get(f"/demos/{name}/")
    assert page.status_code == 200
    config = _embedded_config(page.content.decode())
    assert config["demo"] == name
    assert config["spec"] == json.loads(json.dumps(spec.describe()))
    assert config["params"] == json.loads(json.dumps(spec.defaults())) == json.loads(json.dumps(validate(name, {})))
    assert f'data-module="/static/{spec.module}"' in page.content.decode()


def test_every_demo_is_one_catalog_module_with_its_spec_and_runner():
    assert list(DEMOS) == [m.SPEC.name for m in catalog.MODULES]
    for module in catalog.MODULES:
        spec = module.SPEC
        assert Path(module.__file__).stem == spec.name.replace("-", "_")
        assert spec.load_runner() is module.run, spec.name
        if spec.check:
            assert spec.load_check() is module.check_params
        assert (ROOT / "static" / spec.module).is_file(), spec.module
        for key, param in spec.params.items():
            assert param.label, f"{spec.name}.{key} has no label"


@pytest.mark.parametrize("script", DEMO_SCRIPTS)
def test_demo_scripts_read_defaults_and_limits_from_the_spec(script):
    """No demo script repeats a default or a limit: they come from the embedded spec (spec-params.js)."""
    text = (ROOT / "static" / script).read_text()
    assert 'from "./spec-params.js"' in text, script
    assert not re.findall(r"\b(?:min|max):\s*\d", text), f"{script}: a literal min/max; read it from the spec"
    assert not re.findall(r"\bp\.\w+\s*(?:\|\||\?\?)\s*[\d\"']", text), f"{script}: a literal default"


def test_structured_limits_are_in_the_spec_and_enforced_by_the_check():
    workload = DEMOS["batching"].params["workload"].describe()["limits"]
    too_many = ", ".join(["2@0"] * (workload["max_requests"] + 1))
    with pytest.raises(DemoParamError, match="requests"):
        validate("batching", {"workload": too_many})
    with pytest.raises(DemoParamError):
        validate("batching", {"workload": f"{workload['max_tokens'] + 1}@0"})
    validate("batching", {"workload": f"{workload['max_tokens']}@{workload['max_arrival']}"})
    for name, key in (("paged-attention", "prompts"), ("prefix-caching", "questions")):
        limit = DEMOS[name].params[key].describe()["limits"]["max_lines"]
        validate(name, {key: "\n".join(["Hi"] * limit)})
        with pytest.raises(DemoParamError):
            validate(name, {key: "\n".join(["Hi"] * (limit + 1))})


def test_runners_use_the_specs_defaults():
    """A runner called with only some params fills the rest from its spec, never from defaults of its own."""
    for spec in DEMOS.values():
        filled = spec.with_defaults({})
        assert filled == spec.defaults()
        assert spec.with_defaults({"model": "m"})["model"] == "m"
    for module in catalog.MODULES:
        source = Path(module.__file__).read_text()
        for key in module.SPEC.params:
            assert not re.search(rf"params\.get\(\"{key}\",", source), f"{module.__name__}: its own default for {key}"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_engine_keeps_no_course_code_and_no_django():
    engine = ROOT / "inference_core"
    assert not (engine / "demos").exists() and not (engine / "course_trace.py").exists()
    assert not (engine / "quant_trace.py").exists()
    for path in engine.rglob("*.py"):
        roots = {name.split(".")[0] for name in _imports(path)}
        assert not roots & {"django", "demos", "courseapp", "authoring", "narration", "search", "serverprofile",
                            "inferencelab", "workers", "celery", "channels"}, path


def test_course_events_are_registered_with_the_engines_registry():
    from demos.catalog import events
    from inference_core.engine.trace import event_types

    declared = {cls.type for cls in vars(events).values() if isinstance(cls, type) and getattr(cls, "type", "")}
    assert {"prefill_decode_summary", "attention_compare", "load_summary", "quant_layer", "quant_formats"} <= declared
    assert all(event_types()[name].__module__ == "demos.catalog.events" for name in declared)


def _quoted_controls(text: str) -> list[str]:
    """What a “What to try next” line tells the student to touch: quoted phrases that start with a capital letter
    (quoted tokens such as “ it” and workload values such as “24@0, …” are not controls)."""
    return [q for q in re.findall(r"“([^”]*)”", text) if q[:1].isupper()]


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_what_to_try_next_names_controls_as_the_page_and_the_spec_do(name):
    """A control quoted in “What to try next” is a preset or choice, or a parameter whose spec label (the name the
    comparison legend uses) begins with it and whose field on the page (the demo's script) is labelled with it."""
    spec = DEMOS[name]
    script = (ROOT / "static" / spec.module).read_text()
    presets = {p.get("label") for p in spec.presets}
    choices = {str(c) for p in spec.params.values() for c in (p.choices or ())}
    labels = [p.label for p in spec.params.values()]
    for line in spec.try_next:
        for quoted in _quoted_controls(line):
            if quoted in presets or quoted in choices:
                continue
            assert any(label.startswith(quoted) for label in labels), (
                f"{name}: “{quoted}” is no parameter's label; the spec calls them {labels}")
            assert re.search(r"[\"'`]" + re.escape(quoted), script), (
                f"{name}: the page labels no field “{quoted}” ({spec.module})")
