"""Narration step markers: {step}`demo N` in a lesson ties the narrated block to a step of the demo's reference
run (courseapp/demo_cues.py). Parsed out of the text (never spoken, never shown), validated with a plain error
on the marker's line, and carried to the page for the player."""
from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from courseapp.content import parse_module_file
from courseapp.rendering import ContentError, render_markdown
from django.conf import settings as django_settings

DEMO = ':::{demo} kv-cache\n{"max_new_tokens": 6}\n:::\n'


@pytest.fixture
def runs(settings, tmp_path):
    """A course content folder holding a kv-cache reference run of 6 steps."""
    settings.CONTENT_DIR = tmp_path
    (tmp_path / "runs").mkdir()
    run = {"demo": "kv-cache", "params": {"max_new_tokens": 6}, "steps": 6, "header": {}, "summary": {},
           "events": [{"type": "token", "step": i} for i in range(6)]}
    (tmp_path / "runs" / "kv-cache.json").write_text(json.dumps(run), encoding="utf-8")
    return tmp_path


def test_a_marker_leaves_the_spoken_and_shown_text_and_marks_its_block(runs):
    rendered = render_markdown(f"## Watch\n\n{DEMO}\n{{step}}`kv-cache 3` Here the cache holds four positions.\n")
    paragraph = rendered.cues[-1]
    assert paragraph.text == "Here the cache holds four positions."
    match = re.search(r'<p data-cue="(c\d+)">(.*?)</p>', rendered.html, re.S)
    assert match and match[1] == paragraph.id
    assert '<span class="demo-cue" data-demo="kv-cache" data-step="3" hidden></span>' in match[2]
    assert "{step}" not in rendered.html and "kv-cache 3" not in rendered.html
    # The lesson's embed of that demo names the reference run it replays.
    assert f'data-reference-run="{reverse("courseapp:reference_run", args=["kv-cache"])}"' in rendered.html


def test_a_marker_in_the_middle_of_a_list_item_or_a_heading(runs):
    rendered = render_markdown(f"{DEMO}\n- First {{step}}`kv-cache 0` item.\n\n### Step five {{step}}`kv-cache 5`\n")
    assert [c.text for c in rendered.cues] == ["First item.", "Step five"]
    assert rendered.html.count('class="demo-cue"') == 2


def test_a_demo_the_lesson_does_not_embed_is_refused_on_the_markers_line(runs):
    with pytest.raises(ContentError) as caught:
        render_markdown(f"{DEMO}\nText.\n\n{{step}}`paged-attention 2` Blocks.\n")
    assert caught.value.line == 7
    assert "embeds no demo 'paged-attention'" in caught.value.message
    assert "demos here: kv-cache" in caught.value.message


def test_a_step_out_of_range_is_refused_saying_the_range(runs):
    with pytest.raises(ContentError) as caught:
        render_markdown(f"{DEMO}\n{{step}}`kv-cache 6` Too far.\n")
    assert caught.value.line == 5
    assert "step 6 is out of range" in caught.value.message
    assert "has 6 steps, numbered 0 to 5" in caught.value.message


@pytest.mark.parametrize("target, says", [
    ("kv-cache", "write the demo's name and a step number"),
    ("kv-cache -1", "whole number from 0"),
    ("kv-cache three", "whole number from 0"),
    ("KV 1", "write the demo's name and a step number"),
])
def test_a_malformed_marker_says_how_to_write_it(runs, target, says):
    with pytest.raises(ContentError) as caught:
        render_markdown(f"{DEMO}\nText {{step}}`{target}` here.\n")
    assert says in caught.value.message and caught.value.line == 5


def test_a_demo_without_a_reference_run_is_refused(settings, tmp_path):
    settings.CONTENT_DIR = tmp_path
    with pytest.raises(ContentError, match="has no reference run to replay"):
        render_markdown(f"{DEMO}\n{{step}}`kv-cache 1` Text.\n")


def test_code_that_merely_looks_like_a_marker_is_left_alone(runs):
    rendered = render_markdown(f"{DEMO}\nWrite `{{step}}` then a code span: `kv-cache 1`.\n")
    assert "demo-cue" not in rendered.html and "kv-cache 1" in rendered.html


@pytest.mark.django_db
def test_the_reference_run_is_served_like_a_shared_runs_trace(client, runs):
    data = client.get(reverse("courseapp:reference_run", args=["kv-cache"])).json()
    assert data["demo"] == "kv-cache" and data["steps"] == 6 and len(data["events"]) == 6
    assert data["share_id"] is None
    missing = client.get(reverse("courseapp:reference_run", args=["paged-attention"]))
    assert missing.status_code == 404


def test_the_kv_cache_lesson_drives_its_demo_from_its_stored_reference_run():
    """The real lesson and the real reference run in the course content: every marker validates."""
    module = parse_module_file(django_settings.CONTENT_DIR / "kv-cache.md")
    rendered = render_markdown(module.body)
    steps = [int(s) for s in re.findall(r'class="demo-cue" data-demo="kv-cache" data-step="(\d+)"', rendered.html)]
    assert len(steps) >= 3 and steps == sorted(steps)
    run = json.loads((django_settings.CONTENT_DIR / "runs" / "kv-cache.json").read_text(encoding="utf-8"))
    assert run["steps"] == sum(1 for ev in run["events"] if ev["type"] == "token") > max(steps)
