"""Registry validation, the lesson embed and the demo pages (no worker needed)."""
from __future__ import annotations

import json
import math

import pytest

from demos.embed import render_embed
from demos.registry import DEMOS, DemoParamError, is_deterministic, validate


def test_validate_fills_defaults_and_returns_clean_params():
    params = validate("kv-cache", {"prompt": "Hello there", "max_new_tokens": 5})
    assert params == {"prompt": "Hello there", "max_new_tokens": 5, "use_cache": True, "temperature": 0.0,
                      "seed": None}
    assert validate("kv-cache", {"max_new_tokens": 4.0})["max_new_tokens"] == 4


@pytest.mark.parametrize("params, code", [
    ({"max_new_tokens": True}, "invalid_param"),
    ({"max_new_tokens": 0}, "param_out_of_range"),
    ({"max_new_tokens": 129}, "param_out_of_range"),
    ({"use_cache": "yes"}, "invalid_param"),
    ({"temperature": math.nan}, "invalid_param"),
    ({"temperature": 3}, "param_out_of_range"),
    ({"seed": -1}, "param_out_of_range"),
    ({"prompt": "   "}, "invalid_param"),
    ({"prompt": 5}, "invalid_param"),
    ({"prompt": "x" * 9000}, "param_too_long"),
    ({"model": "gpt-5"}, "unknown_param"),
])
def test_validate_rejects_bad_params_with_stable_codes(params, code):
    with pytest.raises(DemoParamError) as exc:
        validate("kv-cache", params)
    assert exc.value.code == code and exc.value.message


def test_prompt_limit_is_in_tokens(settings):
    settings.DEMO_MAX_PROMPT_TOKENS = 5
    validate("kv-cache", {"prompt": "The capital of France is"})  # 5 tokens
    with pytest.raises(DemoParamError) as exc:
        validate("kv-cache", {"prompt": "The capital of France is Paris"})
    assert exc.value.code == "param_too_long" and "6 tokens" in exc.value.message


def test_unknown_demo_and_determinism():
    with pytest.raises(DemoParamError) as exc:
        validate("nope", {})
    assert exc.value.code == "unknown_demo" and "kv-cache" in exc.value.message
    assert is_deterministic("kv-cache", {"temperature": 0.0, "seed": None})
    assert is_deterministic("kv-cache", {"temperature": 0.7, "seed": 3})
    assert not is_deterministic("kv-cache", {"temperature": 0.7, "seed": None})
    assert DEMOS["kv-cache"].load_runner().__name__ == "run"


def test_render_embed_is_self_contained_and_script_safe():
    html = render_embed("kv-cache", {"prompt": "</script><script>alert(1)</script>", "max_new_tokens": 6})
    assert 'data-module="/static/js/demos/kv-cache.js"' in html and '<script type="module" src="/static/js/demo-embed.js">' in html
    assert "</script><script>alert" not in html
    config = json.loads(html.split('class="ilab-demo__config">')[1].split("</script>")[0])
    assert config["params"]["prompt"].startswith("</script>") and config["params"]["max_new_tokens"] == 6
    assert config["plotlyUrl"] == "/static/vendor/plotly.min.js" and config["wsPath"] == "/ws/demos/"
    with pytest.raises(DemoParamError):
        render_embed("kv-cache", {"max_new_tokens": "many"})


@pytest.mark.django_db
def test_demo_pages(client):
    page = client.get("/demos/kv-cache/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "ilab-demo" in body and "kv-cache.js" in body and "cdn" not in body.lower()
    assert client.get("/demos/no-such-demo/").status_code == 404
    dash = client.get("/demos/dashboard/")
    assert dash.status_code == 200 and "dashboard.js" in dash.content.decode()
    assert client.get("/demos/").status_code == 200
    assert client.get("/static/vendor/plotly.min.js").status_code == 200
    assert not client.cookies.get("sessionid"), "looking at demos makes no session"
    # The first run asks for one (ws-client.js), so the socket that starts it owns it; asked again: the same.
    assert client.post("/demos/visitor/").json() == {"created": True} and client.cookies.get("sessionid")
    assert client.post("/demos/visitor/").json() == {"created": False}
    assert client.get("/demos/visitor/").status_code == 405


@pytest.mark.django_db
def test_run_trace_download_is_owner_only(client):
    from demos.models import Run, RunEvent

    from demos.identity import owners_for_request

    client.post("/demos/visitor/")
    request = type("R", (), {"session": client.session, "user": None})()
    (owner,) = owners_for_request(request)
    assert client.session.session_key not in owner  # a keyed hash of the session's token, not the session key
    mine = Run.objects.create(demo="kv-cache", owner=owner, params={"prompt": "x"}, status="done")
    RunEvent.objects.create(run=mine, seq=0, type="run_started", event={"type": "run_started"})
    theirs = Run.objects.create(demo="kv-cache", owner="s:someone-else", params={}, status="done")
    data = client.get(f"/demos/runs/{mine.id}/events.json").json()
    assert data["events"] == [{"seq": 0, "t": 0.0, "event": {"type": "run_started"}}]
    assert client.get(f"/demos/runs/{theirs.id}/events.json").status_code == 404


@pytest.mark.django_db(transaction=True)
async def test_websocket_from_a_foreign_origin_is_refused(demo_stack):  # consumers need the Redis layer
    from channels.testing import WebsocketCommunicator

    from inferencelab.asgi import application

    host = (b"host", b"localhost:8000")
    for origin in (b"http://evil.example", None, b"http://localhost:9999", b"http://localhost", b"https://localhost:8000"):
        headers = [(b"origin", origin), host] if origin else [host]  # another port is another origin
        comm = WebsocketCommunicator(application, "/ws/demos/", headers=headers)
        connected, _ = await comm.connect(timeout=10)
        assert not connected, origin
        await comm.disconnect()
    comm = WebsocketCommunicator(application, "/ws/demos/", headers=[(b"origin", b"http://localhost:8000"), host])
    connected, _ = await comm.connect(timeout=10)
    assert connected
    await comm.disconnect()


@pytest.mark.django_db
def test_admin_lists_runs_and_their_events(admin_client):
    from demos.models import Run, RunEvent

    run = Run.objects.create(demo="kv-cache", owner="s:x", params={"prompt": "hi"}, status="done", worker="w1")
    RunEvent.objects.create(run=run, seq=0, type="run_started", event={"type": "run_started"})
    assert admin_client.get("/admin/demos/run/").status_code == 200
    page = admin_client.get(f"/admin/demos/run/{run.pk}/change/")
    assert page.status_code == 200 and b"run_started" in page.content


def test_vendored_plotly_is_the_plotly_packages_bundle(client):
    """/static/vendor/plotly.min.js is served locally and is byte-identical to the plotly package's own
    bundled plotly.min.js (not a CDN copy or another version), and collectstatic ships it."""
    import importlib.resources

    from django.contrib.staticfiles import finders

    bundled = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
    assert bundled.is_file(), "the installed plotly package ships package_data/plotly.min.js"
    found = finders.find("vendor/plotly.min.js")
    assert found and open(found, "rb").read() == bundled.read_bytes()
    listed = {(getattr(storage, "prefix", "") or "") + "/" + path
              for finder in finders.get_finders() for path, storage in finder.list(None)}
    assert "vendor/plotly.min.js" in listed
    response = client.get("/static/vendor/plotly.min.js")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == bundled.read_bytes()


def test_the_web_process_checks_every_demo_without_loading_torch():
    """Daphne validates prompts and params but never runs the model: with torch imported it holds ~1M more
    objects, and full garbage collections over them stalled the event loop for tens of ms under load."""
    import subprocess
    import sys

    probe = (
        "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'inferencelab.settings')\n"
        "from inferencelab import server\n"
        "import django; django.setup(); server._settle()\n"
        "from demos.registry import DEMOS, validate\n"
        "for name in DEMOS: validate(name, {})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'gguf', 'transformers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- Each demo's default shows its lesson's effect; "What to try next" comes from the spec ------------------

@pytest.mark.parametrize("name", sorted(DEMOS))
def test_every_demo_suggests_one_or_two_things_to_try_next(name):
    spec = DEMOS[name]
    assert 1 <= len(spec.try_next) <= 2, name
    labels = {p.label for p in spec.params.values()} | {p.get("label") for p in spec.presets}
    for tip in spec.try_next:
        assert tip.endswith(".") and len(tip) < 240, tip
        # concrete: names a setting (by its label, a preset or a value to type) that the page has
        assert any(label and label.split(" (")[0].lower() in tip.lower() for label in labels) or "“" in tip, tip
    config = json.loads(render_embed(name).split('class="ilab-demo__config">')[1].split("</script>")[0])
    assert config["spec"]["try_next"] == list(spec.try_next)


def test_flash_attention_default_prompt_spans_several_tiles():
    """With a prompt shorter than one tile the demo showed a single tile, nothing skipped and "Ratio 1.0×"."""
    from demos.registry import count_tokens

    params = validate("flash-attention", {})
    n, block = count_tokens(params["prompt"]), params["block_size"]
    tiles_per_side = math.ceil(n / block)
    assert tiles_per_side >= 3, (n, block)
    assert tiles_per_side * (tiles_per_side - 1) // 2 >= 3  # causal tiles skipped


def test_flash_attention_lesson_uses_the_registry_default():
    """One place for the default: the lesson's directive does not repeat (or contradict) it."""
    from pathlib import Path

    from courseapp.rendering import render_markdown

    text = (Path(__file__).resolve().parents[2] / "content" / "flash-attention.md").read_text()
    body = text.split("\n---\n", 1)[1] if text.startswith("---") else text
    demos = render_markdown(body).demos
    assert [d["name"] for d in demos] == ["flash-attention"]
    assert demos[0]["props"] == {}


@pytest.mark.model
def test_flash_attention_default_run_tiles_and_skips(loaded_models):
    from demos.catalog.flash_attention import run

    compare = next(ev for ev in run(validate("flash-attention", {}), models=loaded_models) if ev["type"] == "attention_compare")
    assert compare["tiles_computed"] >= 6 and compare["tiles_skipped"] >= 3
    assert compare["naive_score_bytes"] / compare["tile_bytes"] >= 9  # "Ratio" well above 1.0×
    assert compare["max_abs_diff"] < 1e-4
