"""Once loaded, the database is the course's source of truth.

Loading content/ again (every `make run` does) never overwrites a module edited on the web: a file changed
only on disk is applied, a file changed on disk *and* on the web is a conflict, reported by the command and
on the authoring page, and resolved there. Quiz answers and class statistics follow a question's id through
any reordering. A saved change to a published module is a draft that survives leaving the page.
"""
from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from authoring_helpers import confirm_import, editor_data, save_live
from django.core.management import CommandError, call_command
from django.urls import reverse

from classes.stats import DateRange, class_stats
from courseapp.loader import load_course
from courseapp.models import Module, QuizAttempt
from authoring.models import ModuleDraft
from courseapp.quiz import new_seed, seed_token, shuffled

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
WEB_EDIT = "## Why it matters\n\nRewritten on the web by the instructor.\n"


@pytest.fixture
def content(settings, content_dir):
    """The fixture course as content/: loaded, as `make run` does the first time."""
    settings.CONTENT_DIR = content_dir
    call_command("loadcourse", stdout=io.StringIO())
    return content_dir


@pytest.fixture
def author(client, content, instructor):
    client.force_login(instructor)
    return client


def loadcourse(*args) -> str:
    out = io.StringIO()
    call_command("loadcourse", *args, stdout=out)
    return out.getvalue()


def edit_on_web(client, slug: str, source: str):
    response = save_live(client, slug, editor_data(Module.objects.get(slug=slug), source))
    assert response.status_code == 302, response.content.decode()[:2000]
    return Module.objects.get(slug=slug)


def change_on_disk(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def reasons(slug: str) -> list[str]:
    history = Module.objects.get(slug=slug).history.order_by("history_date", "history_id")
    return [h.history_change_reason for h in history]


# --- loadcourse never overwrites web edits ------------------------------------------------------------------

def test_a_web_edit_survives_three_loads(author):
    edit_on_web(author, "intro", WEB_EDIT)
    for _ in range(3):
        out = loadcourse()
        assert "Kept the web edits of 1 module(s) whose file is unchanged: intro" in out
        assert "conflicts 0" in out
        assert Module.objects.get(slug="intro").source == WEB_EDIT
    assert "Rewritten on the web" in author.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert reasons("intro") == ["Loaded from content/intro.md", "Edited in the authoring page"]


def test_a_disk_change_to_a_module_not_edited_on_the_web_is_applied(author, content):
    edit_on_web(author, "intro", WEB_EDIT)  # another module's edit changes nothing here
    change_on_disk(content / "cache.md", "Keys and values of past tokens.", "Only K and V, changed on disk.")
    out = loadcourse()
    assert "updated 1" in out and "conflicts 0" in out
    assert "Only K and V, changed on disk." in Module.objects.get(slug="cache").html
    assert reasons("cache")[-1] == "Loaded from content/cache.md"
    assert "updated 0" in loadcourse()  # applied once: the file is unchanged since
    assert len(reasons("cache")) == 2


def test_a_disk_change_to_a_module_edited_on_the_web_is_a_conflict(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    for _ in range(2):
        out = loadcourse()
        assert "CONFLICT content/intro.md: changed on disk and edited on the web" in out
        assert "conflicts 1" in out
        assert Module.objects.get(slug="intro").source == WEB_EDIT  # not applied
    with pytest.raises(CommandError, match="1 conflict"):
        loadcourse("--strict")
    assert Module.objects.get(slug="intro").source == WEB_EDIT

    page = author.get(reverse("authoring:list")).content.decode()
    assert 'id="conflict-intro"' in page and "content/intro.md" in page
    assert re.search(r'class="diff-added">.*?Changed on disk meanwhile\.', page, re.S)
    assert "Keep the web version" in page and "Take the file's version" in page


def test_publishing_or_moving_a_module_on_the_web_is_a_web_edit_too(author, content):
    author.post(reverse("authoring:publish", args=["batching"]), {"draft": "0"})
    author.post(reverse("authoring:move", args=["cache"]), {"direction": "up"})
    # Moving cache up swaps it with intro: both places changed.
    assert "Kept the web edits of 3 module(s) whose file is unchanged: batching, cache, intro" in loadcourse()
    assert not Module.objects.get(slug="batching").draft
    change_on_disk(content / "batching.md", "title: Batching", "title: Batching, retitled on disk")
    assert "CONFLICT content/batching.md" in loadcourse()
    assert not Module.objects.get(slug="batching").draft and Module.objects.get(slug="batching").title == "Batching"


def test_force_takes_every_file(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    out = loadcourse("--force")
    assert "updated 1" in out and "conflicts 0" in out
    intro = Module.objects.get(slug="intro")
    assert "Changed on disk meanwhile." in intro.source
    assert reasons("intro")[-2:] == ["Edited in the authoring page", "Loaded from content/intro.md"]  # kept
    assert "Kept the web edits" not in loadcourse()


def test_resolving_a_conflict_by_taking_the_file(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    url = reverse("authoring:resolve_conflict", args=["intro"])
    assert author.post(url, {"action": "take_file"}).status_code == 302
    assert "Changed on disk meanwhile." in Module.objects.get(slug="intro").source
    assert reasons("intro")[-1] == "Loaded from content/intro.md over the web edits"
    assert 'id="conflict-intro"' not in author.get(reverse("authoring:list")).content.decode()
    assert "updated 0" in loadcourse() and "conflicts 0" in loadcourse()


def test_resolving_a_conflict_by_keeping_the_web_version_writes_it_to_the_file(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    assert author.post(reverse("authoring:resolve_conflict", args=["intro"]),
                       {"action": "keep_web"}).status_code == 302
    assert (content / "intro.md").read_text().endswith(WEB_EDIT)
    assert 'id="conflict-intro"' not in author.get(reverse("authoring:list")).content.decode()
    out = loadcourse()
    assert "conflicts 0" in out and "Kept the web edits" not in out  # file and module agree again
    change_on_disk(content / "intro.md", "Rewritten on the web", "Then rewritten on disk")
    assert "updated 1" in loadcourse()  # a later disk change applies as to any unedited module


def test_resolving_needs_an_instructor_and_a_choice(client, author, content, student):
    url = reverse("authoring:resolve_conflict", args=["intro"])
    page = author.post(url, {"action": "neither"}, follow=True).content.decode()
    assert "Choose to keep the web version or to take the file" in page
    client.force_login(student)
    assert client.post(url, {"action": "take_file"}).status_code == 403


def test_taking_a_broken_file_changes_nothing(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    change_on_disk(content / "intro.md", "order: 1", "order: first")
    page = author.post(reverse("authoring:resolve_conflict", args=["intro"]), {"action": "take_file"},
                       follow=True).content.decode()
    assert "Not changed" in page and "&#x27;order&#x27; must be a whole number" in page
    assert Module.objects.get(slug="intro").source == WEB_EDIT
    change_on_disk(content / "intro.md", "order: first", "order: 1")
    change_on_disk(content / "intro.md", "prerequisites: []", "prerequisites: [batching]")  # batching needs intro
    page = author.post(reverse("authoring:resolve_conflict", args=["intro"]), {"action": "take_file"},
                       follow=True).content.decode()
    assert "Not changed" in page and "a cycle intro → batching → intro" in page


def test_an_export_to_content_records_what_was_written(author, content):
    edit_on_web(author, "intro", WEB_EDIT)
    assert author.post(reverse("authoring:export")).status_code == 302
    assert (content / "intro.md").read_text().endswith(WEB_EDIT)
    assert "Kept the web edits" not in loadcourse()  # the files hold the web edits now
    change_on_disk(content / "intro.md", "Rewritten on the web", "Rewritten in git")
    assert "updated 1" in loadcourse() and "Rewritten in git" in Module.objects.get(slug="intro").source


def test_an_export_never_overwrites_a_file_changed_on_disk_since(author, content):
    edit_on_web(author, "intro", WEB_EDIT)  # a conflict once intro.md changes too
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    change_on_disk(content / "cache.md", "Keys and values of past tokens.", "Pulled from git, not loaded yet.")
    page = author.post(reverse("authoring:export"), follow=True).content.decode()
    assert "Not written, since their files changed on disk after they were last loaded: cache.md, intro.md" in page
    assert "Changed on disk meanwhile." in (content / "intro.md").read_text()
    assert "Pulled from git, not loaded yet." in (content / "cache.md").read_text()
    out = io.StringIO()
    call_command("exportcourse", str(content), stdout=out)
    assert "cache.md, intro.md" in out.getvalue()
    assert "updated 1" in loadcourse() and "conflicts 1" in loadcourse()  # cache loads; intro waits for a choice


def test_a_zip_import_counts_as_a_web_edit(author, content):
    exported = author.get(reverse("authoring:export_zip")).content
    edited = io.BytesIO()
    import zipfile
    with zipfile.ZipFile(io.BytesIO(exported)) as source, zipfile.ZipFile(edited, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "intro.md":
                data = data.replace(b"Inference runs for every request.", b"Imported from a zip.")
            target.writestr(name, data)
    edited.seek(0)
    edited.name = "course.zip"
    assert author.post(reverse("authoring:import"), {"archive": edited}).status_code == 302
    assert confirm_import(author).status_code == 302
    assert "Imported from a zip." in Module.objects.get(slug="intro").source
    loadcourse()
    assert "Imported from a zip." in Module.objects.get(slug="intro").source


def test_modules_loaded_before_the_record_existed(author, content):
    """After the upgrade, a module whose newest revision is a load is not edited; any other is, to be safe."""
    edit_on_web(author, "intro", WEB_EDIT)
    Module.objects.update(synced_file_hash="", synced_hash="")
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    change_on_disk(content / "cache.md", "Keys and values of past tokens.", "Only K and V, changed on disk.")
    out = loadcourse()
    assert "CONFLICT content/intro.md" in out and "updated 1" in out
    assert Module.objects.get(slug="intro").source == WEB_EDIT
    assert "Only K and V, changed on disk." in Module.objects.get(slug="cache").source
    assert Module.objects.get(slug="batching").synced_hash  # unchanged ones are recorded as agreeing


def test_a_new_file_creates_its_module(content):
    shutil.copy(content / "cache.md", content / "cache-two.md")
    change_on_disk(content / "cache-two.md", "slug: cache", "slug: cache-two")
    assert "created 1" in loadcourse()
    assert Module.objects.filter(slug="cache-two").exists()


# --- `make run`'s load, as real processes ----------------------------------------------------------------

def _make_migrate_commands() -> list[list[str]]:
    """The manage.py lines of the Makefile's `migrate` target (what `make run` runs before starting)."""
    lines = (ROOT / "Makefile").read_text().split("\n")
    start = lines.index("migrate: setup") + 1
    recipe = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        if "manage.py" in line:
            recipe.append([sys.executable if word == "$(PY)" else word for word in line.split()])
    assert recipe and recipe[-1][1:] == ["manage.py", "loadcourse"], recipe
    return recipe


WEB_EDIT_SCRIPT = """
from django.contrib.auth.models import Group, User
from django.test import Client
from courseapp.models import Module
user = User.objects.create_user("teacher")
user.groups.add(Group.objects.get(name="instructor"))
client = Client()
client.force_login(user)
module = Module.objects.get(slug="intro")
data = {"title": module.title, "short_title": module.short_title, "slug": "intro", "track": module.track_id,
        "order": module.order, "prerequisites": "", "summary": module.summary, "action": "save",
        "source": "## Why it matters\\n\\nRewritten on the web by the instructor.\\n"}
first = client.post("/author/intro/", data)
import re
digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', first.content.decode()).group(1)
assert client.post("/author/intro/", {**data, "confirm_live": digest}).status_code == 302
"""


@pytest.mark.timeout(300)
def test_make_runs_load_keeps_a_web_edit_over_three_restarts(tmp_path, content_dir):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    environment.update(DJANGO_SETTINGS_MODULE="inferencelab.settings", PYTHONPATH=str(ROOT),
                       DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", CONTENT_DIR=str(content_dir))

    def run(*command: str) -> str:
        result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def make_migrate() -> str:
        return "".join(run(*command) for command in _make_migrate_commands())

    assert "modules created 3" in make_migrate()
    run(sys.executable, "manage.py", "shell", "-c", WEB_EDIT_SCRIPT)
    for _ in range(3):
        assert "Kept the web edits of 1 module(s) whose file is unchanged: intro" in make_migrate()
        shown = run(sys.executable, "manage.py", "shell", "-c",
                    "from courseapp.models import Module; print(Module.objects.get(slug='intro').source)")
        assert "Rewritten on the web by the instructor." in shown
    change_on_disk(content_dir / "intro.md", "title: Introduction to inference", "title: Changed on disk")
    out = make_migrate()  # a conflict is reported, and `make run` still starts
    assert "CONFLICT" in out and "intro.md" in out


# --- Stable quiz ids ---------------------------------------------------------------------------------------

def answer(client, slug: str, picks: dict[str, list[str]]):
    """A student's quiz post, each pick named by its choice id, sent as its position in the shown order."""
    seed = new_seed()
    data = {"quiz_seed": seed_token(slug, seed)}
    for question in Module.objects.get(slug=slug).questions.prefetch_related("choices"):
        if question.key in picks:
            shown = [c.key for c in shuffled(question, seed)]
            data[question.field_name] = [str(shown.index(key) + 1) for key in picks[question.key]]
    response = client.post(reverse("courseapp:quiz", args=[slug]), data)
    assert response.status_code == 200
    return response


def stats_by_id(slug: str = "intro") -> dict:
    stats = class_stats(Module.objects.get(slug=slug), DateRange.last_days())
    return {q.key: (q.text, q.answered, q.correct, {c.key: c.picks for c in q.choices}) for q in stats.questions}


def csv_questions(client, slug: str = "intro") -> dict:
    """The class dashboard's CSV: question position → (text, answered, correct)."""
    csv_text = client.get(reverse("classes:module_dashboard_csv", args=[slug])).content.decode()
    rows = list(csv.reader(io.StringIO(csv_text)))
    found: dict = {}
    for section, key, subkey, value, label in rows[1:]:
        if section == "question" and subkey in ("answered", "correct"):
            found.setdefault(key, {"text": label})[subkey] = int(value)
    return found


REORDERED_QUIZ = """:::{quiz}
- id: q-which
  question: Which of these are true?
  choices:
    - id: c-decode-compute-bound
      text: Decode is compute-bound at batch 1.
      explanation: The tensor cores mostly wait on memory.
    - id: c-prefill-parallel
      text: Prefill is parallel over the prompt.
      correct: true
      explanation: All prompt tokens go through in one pass.
    - id: c-decode-memory-bound
      text: Decode is memory-bound at batch 1.
      correct: true
      explanation: Each step reads all the weights.
- id: q-when
  question: When does inference run?
  choices:
    - id: c-once
      text: Once, like training.
      explanation: Training happens once; inference happens for every request.
    - id: c-every-request
      text: For every request.
      correct: true
      explanation: Yes, each request needs a forward pass per generated token.
:::
"""


def test_reordering_a_quiz_keeps_every_answer_and_statistic_on_its_question(client, author, content):
    students = [client.__class__() for _ in range(3)]
    answer(students[0], "intro", {"q-when": ["c-every-request"], "q-which": ["c-decode-compute-bound"]})
    answer(students[1], "intro", {"q-when": ["c-once"], "q-which": ["c-decode-memory-bound", "c-prefill-parallel"]})
    answer(students[2], "intro", {"q-when": ["c-every-request"]})
    before = stats_by_id()
    assert before["q-when"][1:] == (3, 2, {"c-every-request": 2, "c-once": 1})
    assert before["q-which"][1:] == (2, 1, {"c-decode-memory-bound": 1, "c-prefill-parallel": 1,
                                            "c-decode-compute-bound": 1})
    assert csv_questions(author)["q1"] == {"text": "When does inference run?", "answered": 3, "correct": 2}

    intro = Module.objects.get(slug="intro")
    source = intro.source[:intro.source.index(":::{quiz}")] + REORDERED_QUIZ
    edit_on_web(author, "intro", source)  # questions and choices reordered, one question reworded

    after = stats_by_id()
    assert [q.key for q in Module.objects.get(slug="intro").questions.order_by("order")] == ["q-which", "q-when"]
    assert after["q-when"] == before["q-when"]
    assert after["q-which"][1:] == before["q-which"][1:] and after["q-which"][0] == "Which of these are true?"
    dashboard = csv_questions(author)
    assert dashboard["q1"] == {"text": "Which of these are true?", "answered": 2, "correct": 1}
    assert dashboard["q2"] == {"text": "When does inference run?", "answered": 3, "correct": 2}
    page = author.get(reverse("classes:module_dashboard", args=["intro"])).content.decode()
    assert page.index("Which of these are true?") < page.index("When does inference run?")
    assert len(QuizAttempt.objects.all()) == 3


def test_missing_ids_are_generated_and_written_back_on_save(author):
    intro = Module.objects.get(slug="intro")
    without_ids = re.sub(r"^(\s*)- id: \S+\n\s*", r"\1- ", intro.source, flags=re.M)
    assert "id:" not in without_ids
    saved = edit_on_web(author, "intro", without_ids).source
    ids = re.findall(r"id: (\S+)", saved)
    assert len(ids) == 7 and all(re.fullmatch(r"[qc]-[0-9a-f]{6}", i) for i in ids)
    assert saved.replace("".join(ids), "") != without_ids
    assert list(saved.split(":::{quiz}")[0]) == list(without_ids.split(":::{quiz}")[0])  # the lesson untouched
    # The same text always gets the same ids; an id written once stays when its question is reworded.
    assert edit_on_web(author, "intro", without_ids).source == saved
    reworded = saved.replace("When does inference run?", "When is inference run?")
    assert edit_on_web(author, "intro", reworded).questions.get(order=1).key == ids[0]


def test_a_quiz_id_must_be_valid_and_unique(author):
    intro = Module.objects.get(slug="intro")
    for bad, message in [("q-which", "quiz question 2: id &#x27;q-which&#x27; is already used by question 1"),
                         ("Q 1", "is not valid")]:
        source = intro.source.replace("id: q-when", f"id: {bad}")
        response = author.post(reverse("authoring:edit", args=["intro"]), editor_data(intro, source))
        assert response.status_code == 200 and message in response.content.decode()
    assert Module.objects.get(slug="intro").source == intro.source


def test_a_file_without_ids_gets_the_ids_its_next_export_writes(content, tmp_path):
    intro = content / "intro.md"
    intro.write_text(re.sub(r"^(\s*)- id: \S+\n\s*", r"\1- ", intro.read_text(), flags=re.M))
    assert "updated 1" in loadcourse("--force")
    keys = list(Module.objects.get(slug="intro").questions.values_list("key", flat=True))
    assert all(re.fullmatch(r"q-[0-9a-f]{6}", key) for key in keys)
    assert "updated 0" in loadcourse("--force")  # the same ids again: nothing changes
    call_command("exportcourse", str(tmp_path / "out"), stdout=io.StringIO())
    assert all(f"id: {key}" in (tmp_path / "out" / "intro.md").read_text() for key in keys)


# --- A published module's draft ------------------------------------------------------------------------------

def test_a_saved_change_to_a_published_module_is_a_draft_that_survives_leaving(client, author, content, instructor):
    intro = Module.objects.get(slug="intro")
    url = reverse("authoring:edit", args=["intro"])
    response = author.post(url, editor_data(intro, intro.source + "\nA draft paragraph.\n"))
    assert response.status_code == 200 and "Publish these changes" in response.content.decode()
    assert "A draft paragraph." not in client.get(reverse("courseapp:module", args=["intro"])).content.decode()

    author.get(reverse("authoring:list"))  # leave the page
    author.logout()
    author.force_login(instructor)  # and come back another day
    page = author.get(url).content.decode()
    assert "A draft paragraph." in page.split('name="source"')[1].split("</textarea>")[0]  # in the editor
    assert re.search(r'class="diff-added">.*?A draft paragraph\.', page, re.S)
    assert "Publish these changes" in page and "Discard these changes" in page
    list_page = author.get(reverse("authoring:list")).content.decode()
    assert "Unpublished changes" in list_page
    student_page = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert "A draft paragraph." not in student_page  # students see the published text meanwhile

    digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', page).group(1)
    published = author.post(url, editor_data(intro, intro.source + "\nA draft paragraph.\n", confirm_live=digest))
    assert published.status_code == 302
    assert "A draft paragraph." in client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert not ModuleDraft.objects.exists()


def test_a_draft_can_be_discarded(author, content):
    intro = Module.objects.get(slug="intro")
    url = reverse("authoring:edit", args=["intro"])
    author.post(url, editor_data(intro, intro.source + "\nA draft paragraph.\n", title="Draft title"))
    assert ModuleDraft.objects.get().front_matter["title"] == "Draft title"
    assert 'value="Draft title"' in author.get(url).content.decode()
    assert author.post(reverse("authoring:discard_draft", args=["intro"])).status_code == 302
    assert not ModuleDraft.objects.exists()
    page = author.get(url).content.decode()
    assert "A draft paragraph." not in page and "Discard these changes" not in page
    assert Module.objects.get(slug="intro").source == intro.source


def test_a_pending_draft_is_a_web_edit_for_loadcourse(author, content):
    intro = Module.objects.get(slug="intro")
    author.post(reverse("authoring:edit", args=["intro"]), editor_data(intro, intro.source + "\nDraft.\n"))
    change_on_disk(content / "intro.md", "Inference runs for every request.", "Changed on disk meanwhile.")
    assert "CONFLICT content/intro.md" in loadcourse()
    assert ModuleDraft.objects.get().source.endswith("Draft.\n")


def test_loading_an_unedited_course_changes_nothing(content):
    state = list(Module.objects.order_by("slug").values_list("slug", "source", "synced_hash", "synced_file_hash"))
    assert "unchanged 3" in loadcourse()
    assert list(Module.objects.order_by("slug").values_list("slug", "source", "synced_hash",
                                                            "synced_file_hash")) == state
    assert all(len(reasons(slug)) == 1 for slug in ("intro", "cache", "batching"))


def test_load_course_on_an_empty_database_creates_every_module(content_dir):
    report = load_course(content_dir)
    assert sorted(report.created) == ["batching", "cache", "intro"] and not report.conflicts


# --- The migration to ids ----------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_existing_quizzes_and_attempts_their_ids(content_dir):
    """A database from before ids: its quiz rows, its Markdown and its position-keyed attempts get the ids a
    load of the same file (without ids) would give, so statistics and the next load agree with it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("courseapp", "0005_search_index")], [("courseapp", "0006_quiz_ids_content_sync_module_drafts")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    track = old.get_model("courseapp", "Track").objects.create(slug="basics", title="Basics")
    without_ids = "## Q\n\n:::{quiz}\n- question: One?\n  choices:\n    - text: Sure\n      correct: true\n" \
                  "      explanation: Right.\n    - text: Nope\n      explanation: Wrong.\n" \
                  "- question: Two?\n  choices:\n    - text: A\n      explanation: Not A.\n" \
                  "    - text: B\n      correct: true\n      explanation: B it is.\n:::\n"
    module = old.get_model("courseapp", "Module").objects.create(slug="m", title="M", track=track, draft=False,
                                                                 source=without_ids)
    Question, Choice = old.get_model("courseapp", "Question"), old.get_model("courseapp", "Choice")
    for order, (text, choices) in enumerate([("One?", ["Sure", "Nope"]), ("Two?", ["A", "B"])], start=1):
        question = Question.objects.create(module=module, order=order, text=text, text_html=text)
        for c_order, c_text in enumerate(choices, start=1):
            Choice.objects.create(question=question, order=c_order, text=c_text, text_html=c_text,
                                  correct=c_order == order, explanation=".", explanation_html=".")
    attempt = old.get_model("courseapp", "QuizAttempt").objects.create(
        module=module, score=1, total=2, visitor="v", answers={"1": [1], "2": [1, 9], "7": [1]})

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    from courseapp.loader import render_module_file  # what a load of the file without ids gives
    from courseapp.content import parse_module_text
    parsed = parse_module_text(f"---\ntitle: M\nslug: m\ntrack: basics\norder: 0\n---\n{without_ids}")
    rendered = render_module_file(parsed)
    ids = [(q.id, [c.id for c in q.choices]) for q in rendered.questions]
    rows = new.get_model("courseapp", "Question").objects.filter(module_id=module.pk).order_by("order")
    assert [(q.key, [c.key for c in q.choices.order_by("order")]) for q in rows] == ids
    assert new.get_model("courseapp", "Module").objects.get(pk=module.pk).source == parsed.body  # ids written in
    (q1, (yes, _)), (q2, (a, _)) = ids
    stored = new.get_model("courseapp", "QuizAttempt").objects.get(pk=attempt.pk).answers
    assert stored == {q1: [yes], q2: [a], "7": [1]}  # a position the quiz lacks is kept, out of every statistic

    executor = MigrationExecutor(connection)  # and back: positions again
    executor.migrate(before)
    back = executor.loader.project_state(before).apps.get_model("courseapp", "QuizAttempt")
    assert back.objects.get(pk=attempt.pk).answers == {"1": [1], "2": [1], "7": [1]}
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # every app: going back unapplied those built on courseapp
