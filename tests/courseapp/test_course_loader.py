"""loadcourse / exportcourse: valid files load, broken files fail with file:line and change nothing,
export → load round-trips byte for byte."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from courseapp.loader import CourseLoadError, export_course, load_course
from courseapp.models import Choice, Module, Question, Track

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"

pytestmark = pytest.mark.django_db


def db_state():
    """Everything loadcourse writes, as comparable plain data."""
    return (
        list(Track.objects.order_by("slug").values_list("slug", "title", "order", "summary")),
        list(Module.objects.order_by("slug").values_list(
            "slug", "title", "short_title", "track__slug", "order", "prerequisites", "summary", "draft",
            "source", "cue_hash", "reading_minutes")),
        list(Question.objects.order_by("module__slug", "order").values_list("module__slug", "order", "text")),
        list(Choice.objects.order_by("question__module__slug", "question__order", "order").values_list(
            "text", "correct", "explanation")),
    )


def test_valid_course_loads(content_dir):
    report = load_course(content_dir)
    assert sorted(report.created) == ["batching", "cache", "intro"]
    intro = Module.objects.get(slug="intro")
    assert intro.track.slug == "basics" and intro.short_title == "Intro" and not intro.draft
    assert intro.summary == "Why inference matters: a short tour."
    assert [c["text"] for c in intro.cues] == ["Why it matters", "Inference runs for every request.",
                                              "Training happens once."]
    assert intro.questions.count() == 2
    assert intro.questions.get(order=2).multiple
    assert Module.objects.get(slug="batching").draft
    assert Module.objects.get(slug="batching").prerequisites == ["intro", "cache"]


def test_load_is_idempotent(content_dir):
    load_course(content_dir)
    before = db_state()
    report = load_course(content_dir)
    assert sorted(report.unchanged) == ["batching", "cache", "intro"]
    assert db_state() == before


def test_reload_updates_changed_module(content_dir):
    load_course(content_dir)
    path = content_dir / "cache.md"
    path.write_text(path.read_text().replace("Keys and values of past tokens.", "Only K and V."))
    report = load_course(content_dir)
    assert report.updated == ["cache"]
    assert "Only K and V." in Module.objects.get(slug="cache").html


def test_loadcourse_command(content_dir, capsys):
    call_command("loadcourse", str(content_dir))
    assert "modules created 3" in capsys.readouterr().out


def test_repository_kv_cache_lesson_loads_and_round_trips(tmp_path):
    """content/kv-cache.md (this app's reference lesson) is valid and already in canonical form.
    The whole content/ directory is checked by test_course_modules.py."""
    for slug in ("overview", "prefill-decode", "kv-cache"):  # kv-cache builds on the other two
        load_course(REPO_CONTENT / f"{slug}.md")
    module = Module.objects.get(slug="kv-cache")
    assert module.prerequisites == ["prefill-decode"]
    assert module.questions.count() == 5
    assert all(c.explanation for c in Choice.objects.filter(question__module=module))
    assert module.demos and module.demos[0]["name"] == "kv-cache"
    assert module.demos[0]["props"] == {"prompt": module.demos[0]["props"]["prompt"], "max_new_tokens": 32,
                                       "use_cache": True}
    assert "Sources" in [item["text"] for item in module.outline]
    export_course(tmp_path)
    assert (tmp_path / "kv-cache.md").read_bytes() == (REPO_CONTENT / "kv-cache.md").read_bytes()
    assert (tmp_path / "tracks.yaml").read_bytes() == (REPO_CONTENT / "tracks.yaml").read_bytes()


def test_export_load_round_trip_is_exact(content_dir, tmp_path):
    load_course(content_dir)
    state = db_state()
    out = tmp_path / "exported"
    call_command("exportcourse", str(out))
    for source in content_dir.iterdir():
        assert (out / source.name).read_bytes() == source.read_bytes(), source.name
    Module.objects.all().delete()
    Track.objects.all().delete()
    load_course(out)
    assert db_state() == state
    again = tmp_path / "again"
    export_course(again)
    assert files_in(again) == files_in(out)


def files_in(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (runs/ and images/ included), by its path there."""
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_export_normalizes_a_non_canonical_file(content_dir, tmp_path):
    path = content_dir / "batching.md"
    path.write_text(path.read_text().replace("order: 1", "order:   1   # first"))
    load_course(content_dir)
    export_course(tmp_path)
    assert "order: 1\n" in (tmp_path / "batching.md").read_text()
    Module.objects.all().delete()
    load_course(tmp_path)
    assert Module.objects.get(slug="batching").order == 1


# --- Broken files -----------------------------------------------------------------------------

GOOD_FM = "---\ntitle: Broken\nslug: broken\ntrack: basics\norder: 5\ndraft: false\n---\n"
BROKEN = {
    "no front matter": ("## Just a heading\n", 1, "front matter"),
    "unclosed front matter": ("---\ntitle: x\nslug: broken\n\nBody\n", 1, "never closed"),
    # At the line that opens the list, not the next one, where YAML gave up.
    "front matter yaml": ("---\ntitle: [unclosed\nslug: broken\n---\nBody\n", 2, "not closed with ']'"),
    "missing field": ("---\ntitle: Broken\nslug: broken\norder: 1\n---\nBody\n", 1, "'track'"),
    "unknown field": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: 1\nauthor: me\n---\n", 6,
                      "unknown front matter field 'author'"),
    "order not a number": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: first\n---\n", 5, "'order'"),
    "draft not bool": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: 1\ndraft: maybe\n---\n", 6,
                       "'draft' must be true or false"),
    "computed field": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: 1\nreading_time: 5\n---\n", 6,
                       "computed from the text"),
    "prerequisite cycle": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: 1\nprerequisites: [broken-b]\n---\n",
                           6, "cycle: broken-b → broken → broken-b"),
    "unknown track": ("---\ntitle: B\nslug: broken\ntrack: nowhere\norder: 1\n---\n", 4, "unknown track 'nowhere'"),
    "unknown prerequisite": ("---\ntitle: B\nslug: broken\ntrack: basics\norder: 1\nprerequisites: [ghost]\n---\n",
                             6, "prerequisite 'ghost'"),
    "slug mismatch": ("---\ntitle: B\nslug: other\ntrack: basics\norder: 1\n---\n", 3, "does not match the file name"),
    "duplicate slug": ("---\ntitle: B\nslug: intro\ntrack: basics\norder: 1\n---\n", 3, None),
    "unknown directive": (GOOD_FM + "Text\n\n:::{video} intro\n:::\n", 10, "unknown directive '{video}'"),
    "unclosed directive": (GOOD_FM + "Text\n\n:::{callout} note\nNever closed\n", 10, "never closed"),
    "bad callout kind": (GOOD_FM + ":::{callout} danger\nx\n:::\n", 8, "callout kind 'danger'"),
    "demo bad json": (GOOD_FM + "Intro\n\n:::{demo} kv-cache\n{\"prompt\": \"hi\",\n \"max_new_tokens\": }\n:::\n",
                      12, "not valid JSON"),
    "demo unknown": (GOOD_FM + ":::{demo} teleport\n{}\n:::\n", 8, "demo 'teleport'"),
    "demo bad param": (GOOD_FM + ":::{demo} kv-cache\n{\"max_new_tokens\": 100000}\n:::\n", 8, "max_new_tokens"),
    "demo param type": (GOOD_FM + ":::{demo} kv-cache\n{\"use_cache\": \"yes\"}\n:::\n", 8, "use_cache"),
    "calculator unknown": (GOOD_FM + "Intro\n\n:::{calculator} kv-sise\n:::\n", 10,
                           "unknown calculator 'kv-sise'"),
    "calculator is a helper module": (GOOD_FM + ":::{calculator} formulas {\"model\": \"llama-3-8b\"}\n:::\n", 8,
                                      "unknown calculator 'formulas'"),
    "quiz yaml": (GOOD_FM + ":::{quiz}\n- question: Q\n  choices: [\n:::\n", 11, "quiz is not valid YAML"),
    "quiz no correct": (GOOD_FM + "Intro\n\n:::{quiz}\n- question: Pick one\n  choices:\n    - text: A\n"
                        "      explanation: a\n    - text: B\n      explanation: b\n:::\n", 11, "no correct choice"),
    "quiz no explanation": (GOOD_FM + ":::{quiz}\n- question: Pick\n  choices:\n    - text: A\n      correct: true\n"
                            "      explanation: a reason\n    - text: B\n:::\n", 14, "needs an 'explanation'"),
    "quiz in callout line offset": (GOOD_FM + "::::{callout} note\nText\n\n:::{video} x\n:::\n::::\n", 11,
                                    "unknown directive"),
    "yaml reads yes as bool": (GOOD_FM + ":::{quiz}\n- question: Pick\n  choices:\n    - text: A\n"
                               "      correct: true\n      explanation: yes\n    - text: B\n      explanation: b\n:::\n",
                               11, "put it in quotes"),
    "two quizzes": (GOOD_FM + ":::{quiz}\n- question: Q\n  choices:\n    - text: A\n      correct: true\n"
                    "      explanation: a\n    - text: B\n      explanation: b\n:::\n\n:::{quiz}\n- question: Q\n"
                    "  choices:\n    - text: A\n      correct: true\n      explanation: a\n    - text: B\n"
                    "      explanation: b\n:::\n", 18, "one quiz"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_file_fails_with_file_and_line_and_changes_nothing(case, content_dir):
    load_course(content_dir)
    intro = content_dir / "intro.md"
    intro.write_text(intro.read_text().replace("Inference runs for every request.", "Edited paragraph."))
    before = db_state()
    text, line, message = BROKEN[case]
    broken = content_dir / "broken.md"
    broken.write_text(text)
    if case == "prerequisite cycle":
        (content_dir / "broken-b.md").write_text(
            "---\ntitle: B2\nslug: broken-b\ntrack: basics\norder: 2\nprerequisites: [intro, broken]\n---\n")
    with pytest.raises(CourseLoadError) as excinfo:
        load_course(content_dir)
    errors = [str(e) for e in excinfo.value.errors]
    assert len(errors) == 1, errors
    if case == "prerequisite cycle":  # reported once, at the first file of the cycle
        broken = content_dir / "broken-b.md"
    assert errors[0].startswith(f"{broken}:{line}: "), errors[0]
    if message:
        assert message in errors[0]
    assert db_state() == before  # the valid edit to intro.md was not applied either


def test_command_reports_every_error(content_dir):
    (content_dir / "a.md").write_text("no front matter\n")
    (content_dir / "b.md").write_text("---\ntitle: B\nslug: b\ntrack: basics\norder: x\n---\n")
    with pytest.raises(CommandError) as excinfo:
        call_command("loadcourse", str(content_dir))
    message = str(excinfo.value)
    assert "2 errors" in message and "nothing was changed" in message
    assert re.search(r"a\.md:1: ", message) and re.search(r"b\.md:5: ", message)
    assert not Module.objects.exists()


def test_broken_tracks_file(content_dir):
    (content_dir / "tracks.yaml").write_text("- slug: basics\n  title: Basics\n  order: one\n")
    with pytest.raises(CourseLoadError) as excinfo:
        load_course(content_dir)
    assert str(excinfo.value.errors[0]).startswith(f"{content_dir / 'tracks.yaml'}:1: ")


def test_readme_and_underscore_files_are_not_modules(content_dir):
    (content_dir / "README.md").write_text("# How to write modules\n")
    (content_dir / "_notes.md").write_text("scratch\n")
    assert sorted(load_course(content_dir).created) == ["batching", "cache", "intro"]


def test_single_file_load(content_dir):
    load_course(content_dir / "intro.md")
    assert list(Module.objects.values_list("slug", flat=True)) == ["intro"]


def test_missing_path():
    with pytest.raises(CourseLoadError):
        load_course(Path("/nonexistent/content"))


# --- Property: any front matter the UI can produce survives export → load unchanged ----------------

from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402

from courseapp.content import parse_module_text, serialize_module  # noqa: E402

one_line = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufeff"),
                   max_size=60)
slugs = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)


@hsettings(max_examples=60, deadline=None)
@given(title=one_line.filter(lambda s: s.strip()), short=one_line, summary=one_line, slug=slugs,
       order=st.integers(-1000, 1000), draft=st.booleans(), prereqs=st.lists(slugs, max_size=3, unique=True),
       body=st.text(max_size=200))
def test_front_matter_round_trip_property(title, short, summary, slug, order, draft, prereqs, body):
    prereqs = [p for p in prereqs if p != slug]
    front = {"title": title, "short_title": short, "slug": slug, "track": "basics", "order": order,
             "prerequisites": prereqs, "summary": summary, "draft": draft}
    text = serialize_module(front, body)
    parsed = parse_module_text(text)
    assert parsed.front_matter == front
    assert parsed.body == body
    assert serialize_module(parsed.front_matter, parsed.body) == text
