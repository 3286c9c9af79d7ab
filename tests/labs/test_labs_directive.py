"""The `:::{lab}` directive: a lab renders as a table and labelled questions with its definition stored (cleaned
params, the same a `start` stores), and every mistake is refused at the directive's line, naming what is wrong."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from courseapp.content import parse_module_file
from courseapp.loader import load_course, render_module_file
from courseapp.models import Module
from courseapp.rendering import ContentError, render_markdown
from labs.models import Lab
from lab_helpers import lab_markdown, lab_props

CONTENT = Path(__file__).resolve().parents[2] / "content"


def refusal(**changes) -> ContentError:
    body = "Intro.\n\n" + lab_markdown(line_before="More text.", **changes)
    assert body.split("\n")[4].startswith(":::{lab}")
    with pytest.raises(ContentError) as caught:
        render_markdown(body)
    return caught.value


def test_a_lab_renders_its_table_and_questions_and_keeps_the_cleaned_params():
    rendered = render_markdown(lab_markdown())
    (lab,) = rendered.labs
    assert [c["id"] for c in lab["configs"]] == ["fp32", "int8", "int4"]
    # What a start of the row stores on its Run: every default filled in.
    assert lab["configs"][1]["params"] == {"prompt": "The capital of France is", "format": "int8", "layer": 3,
                                           "projection": "w_down", "max_new_tokens": 4}
    assert lab["configs"][0]["side"] == "fp32" and lab["questions"][0]["metric"] == "decode_tokens_per_s"
    html = rendered.html
    assert re.search(r"<table class=\"ilab-lab__table\">\s*<caption>Your runs: decode tokens per second", html)
    assert html.count("<tr data-config=") == 3
    assert '<label for="lab-formats-speedup">How many times faster?</label>' in html
    assert '<legend>Fewest bytes?</legend>' in html and 'type="radio" name="bytes" value="int4"' in html
    assert 'role="status" aria-live="polite"' in html and "js/labs/lab.js" in html
    config = json.loads(re.search(r'class="ilab-lab__config">(.*?)</script>', html, re.S)[1])
    assert config["urls"]["table"] == "/labs/__module__/formats/table" and config["lab"]["repeats"] == 3


@pytest.mark.parametrize("changes, message", [
    ({"demo": "nope"}, "lab 'formats': unknown demo 'nope'"),
    ({"demo": "attention"}, "demo 'attention' has no lab metrics"),
    ({"metric": "speed"}, "'metric' must be one of decode_tokens_per_s, weight_bytes_per_token"),
    ({"repeats": 0}, "'repeats' must be a whole number from 1 to 5"),
    ({"repeats": 6}, "'repeats' must be a whole number from 1 to 5"),
    ({"configs": [{"id": "a", "label": "A", "params": {"format": "int8"}}]}, "a list of 2 to 6 configurations"),
    ({"configs": [{"id": f"c{n}", "label": "C", "params": {"layer": n}} for n in range(7)]},
     "a list of 2 to 6 configurations"),
    ({"params": {"max_new_tokens": 999}}, "configuration 'fp32': max_new_tokens must be at most 24"),
    ({"configs": [{"id": "a", "label": "A", "params": {"format": "int9"}}, {"id": "b", "label": "B"}]},
     "configuration 'a': format must be one of"),
    ({"configs": [{"id": "a", "label": "A", "params": {"format": "int8"}, "side": "bf16"},
                  {"id": "b", "label": "B"}]}, "configuration 'a': 'side' must be one of fp32"),
    ({"configs": [{"id": "a", "label": "A", "params": {"format": "int8"}},
                  {"id": "b", "label": "B", "params": {"format": "int8"}}]},
     "configurations 'a' and 'b' measure the same thing"),
    ({"questions": [{"id": "q", "kind": "text", "text": "A"}, {"id": "q", "kind": "text", "text": "B"}]},
     "question id 'q' is used twice"),
    ({"questions": [{"id": "q", "kind": "ratio", "of": "int4", "over": "int5", "text": "A"}]},
     "question 'q': 'over' must name a configuration"),
    ({"questions": [{"id": "q", "kind": "argmin", "metric": "joules", "text": "A"}]}, "question 'q': 'metric' must be"),
    ({"questions": [{"id": "q", "kind": "guess", "text": "A"}]}, "'kind' must be one of argmax, argmin, ratio, text"),
    ({"colour": "red"}, "unknown key(s) colour"),
])
def test_a_bad_lab_is_refused_at_its_line_saying_what_is_wrong(changes, message):
    error = refusal(**changes)
    assert error.line == 5  # the ':::{lab}' line
    assert message in error.message


def test_two_labs_with_one_id_are_refused_at_the_second():
    body = lab_markdown() + "\n" + lab_markdown(line_before="Again.")
    with pytest.raises(ContentError) as caught:
        render_markdown(body)
    second = [n for n, text in enumerate(body.split("\n"), start=1) if text.startswith(":::{lab}")][1]
    assert caught.value.line == second == 9 and "another lab of this module has the same id" in caught.value.message


def test_the_quantization_module_carries_the_four_configuration_lab():
    rendered = render_module_file(parse_module_file(CONTENT / "quantization.md"))
    (lab,) = rendered.labs
    assert [c["id"] for c in lab["configs"]] == ["fp32", "int8", "int4-g128", "nf4"]
    assert {c["params"]["format"] for c in lab["configs"]} == {"int8", "int4-g128", "nf4"}
    assert lab["configs"][0]["side"] == "fp32" and lab["configs"][0]["params"] == lab["configs"][2]["params"]
    assert len({c["params"]["prompt"] for c in lab["configs"]}) == 1 and lab["repeats"] == 3
    assert [q["kind"] for q in lab["questions"]] == ["ratio", "argmin", "text"]


@pytest.mark.django_db
def test_saving_a_module_writes_its_lab_rows_and_a_later_save_replaces_them(content_dir):
    path = next(p for p in sorted(content_dir.glob("*.md")) if "draft: true" not in p.read_text())
    original = path.read_text()
    path.write_text(original + "\n" + lab_markdown())
    load_course(content_dir)
    module = Module.objects.get(slug=parse_module_file(path).slug)
    assert list(Lab.objects.filter(module=module).values_list("key", flat=True)) == ["formats"]
    assert Lab.objects.get(module=module).definition["configs"][2]["params"]["format"] == "int4-g128"
    path.write_text(original)
    load_course(content_dir)
    assert not Lab.objects.filter(module=module).exists()

