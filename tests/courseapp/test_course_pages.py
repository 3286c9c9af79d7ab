"""Student pages: index, module page, quiz grading without JS, progress and its merge on sign-up."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp.loader import load_course
from courseapp.models import Module, ModuleProgress, QuizAttempt

pytestmark = pytest.mark.django_db

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"


def module_url(slug):
    return reverse("courseapp:module", args=[slug])


def post_quiz(client, slug, answers, **extra):
    """Post answers named by their authored choice orders, as the page would: through a fresh signed seed,
    each answer sent as its position in that seed's shuffled order."""
    from courseapp.quiz import new_seed, seed_token, shuffled

    seed = new_seed()
    data = {"quiz_seed": seed_token(slug, seed)}
    for question in Module.objects.get(slug=slug).questions.all():
        values = answers.get(question.field_name)
        if values is None:
            continue
        shown = [c.order for c in shuffled(question, seed)]
        data[question.field_name] = [str(shown.index(int(v)) + 1) for v in ([values] if isinstance(values, str) else values)]
    return client.post(reverse("courseapp:quiz", args=[slug]), data, **extra)


def test_index_lists_tracks_modules_and_hides_drafts(client, course):
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Basics" in html and "Introduction to inference" in html and "Caching" in html
    assert "Batching" not in html  # draft
    assert "min read" in html
    assert "Builds on:" in html  # prerequisite hint for cache → intro


def count_queries(client, url) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def add_modules(n: int) -> None:
    intro = Module.objects.get(slug="intro")
    for i in range(n):
        Module.objects.create(slug=f"extra-{i}", title=f"Extra {i}", track=intro.track, order=10 + i, draft=False,
                              prerequisites=["intro", "cache"], html="<p>x</p>")


def test_index_query_count_is_constant(client, course, student):
    client.force_login(student)
    client.get(module_url("intro"))
    before = count_queries(client, "/")
    add_modules(12)
    client.get(module_url("extra-3"))
    # 9: one more since the map shows each module's labs and exercises (the labs with the learner's submissions; a
    # module's exercises are noted when it is saved, courseapp/practice.py)
    assert count_queries(client, "/") == before <= 9


def test_module_page_query_count_is_constant(client, course, student):
    client.force_login(student)
    post_quiz(client, "intro", {"q1": "1"})
    client.get(module_url("cache"))
    before = count_queries(client, module_url("cache"))
    add_modules(12)
    # 15: the glossary version (its terms are cached), and the module's labs with the learner's submissions (the
    # completion rule's practice, courseapp/completion.py)
    assert count_queries(client, module_url("cache")) == before <= 15
    client.get(module_url("extra-5"))
    assert count_queries(client, module_url("extra-5")) <= before + 1  # + the prerequisites lookup


def test_draft_is_404_for_students_and_visible_to_instructors(client, course, student, instructor):
    assert client.get(module_url("batching")).status_code == 404
    client.force_login(student)
    assert client.get(module_url("batching")).status_code == 404
    client.force_login(instructor)
    assert client.get(module_url("batching")).status_code == 200


def test_module_page_parts(client, course):
    html = client.get(module_url("cache")).content.decode()
    assert 'href="#what-is-cached"' in html  # outline
    assert 'id="what-is-cached" data-cue="c1"' in html
    assert "Narration not generated yet" in html
    assert "This module builds on" in html  # intro not completed yet
    assert 'rel="prev"' in html and "Intro" in html
    assert 'class="callout callout-warning" role="note"' in html
    assert "Mark this module as complete" in html  # no quiz
    assert "plotly" not in html  # no demos here


def test_pager_works_across_a_gated_module(client, course):
    html = client.get(module_url("intro")).content.decode()
    assert f'rel="next" href="{module_url("cache")}"' in html
    assert client.get(module_url("cache")).status_code == 200  # prerequisites are hints, not locks


def test_quiz_graded_on_server_wrong_choice_shows_explanation(client, course):
    response = post_quiz(client, "intro", {"q1": "2", "q2": ["1"]})
    html = response.content.decode()
    assert response.status_code == 200
    assert "You scored <strong>0/2</strong>" in html
    assert "Aim for 2/2" in html
    assert "Training happens once; inference happens for every request." in html  # explanation of wrong choice
    assert "Each step reads all the weights." in html  # chosen (correct but incomplete) choice explained
    assert "All prompt tokens go through in one pass." not in html  # not chosen: not explained
    attempt = QuizAttempt.objects.get()
    assert (attempt.score, attempt.total, attempt.answers) == (0, 2, {"q-when": ["c-once"],
                                                                      "q-which": ["c-decode-memory-bound"]})


def test_quiz_pass_completes_module(client, course):
    response = post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    assert "You scored <strong>2/2</strong>" in response.content.decode()
    progress = ModuleProgress.objects.get(module__slug="intro")
    assert progress.completed and progress.best_score == 2
    html = client.get("/").content.decode()
    assert "1 of 2 modules completed" in html
    assert "Resume where you left off" in html


def test_quiz_fragment_for_fetch(client, course):
    response = post_quiz(client, "intro", {"q1": "2"}, HTTP_X_REQUESTED_WITH="fetch")
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="quiz"') and "<html" not in html
    assert "Not answered." in html


def test_mark_complete_and_position(client, course):
    client.post(reverse("courseapp:complete", args=["cache"]))
    assert ModuleProgress.objects.get(module__slug="cache").completed
    place = reverse("courseapp:place", args=["cache"])
    response = client.post(place, {"position": "12.5"})
    assert response.json() == {"ok": True, "position": 12.5, "section": None}
    assert ModuleProgress.objects.get(module__slug="cache").audio_position == 12.5
    assert client.post(place, {"position": "x"}).status_code == 400
    assert client.post(place, {"section": "not-a-heading"}).status_code == 400
    assert client.post(place, {}).status_code == 400


def test_resume_where_you_left_off_in_a_module(client, course):
    module = Module.objects.get(slug="intro")
    module.outline = [{"id": "one", "text": "One", "level": 2}, {"id": "two", "text": "Part two", "level": 2}]
    module.save()
    client.post(reverse("courseapp:place", args=["intro"]), {"section": "two"})
    html = client.get(module_url("intro")).content.decode()
    assert '<a class="button button-secondary" href="#two">Resume where you left off: Part two</a>' in html
    client.post(reverse("courseapp:place", args=["intro"]), {"section": "one"})
    assert "Resume where you left off" not in client.get(module_url("intro")).content.decode()


def test_anonymous_progress_is_merged_on_signup(client, course):
    post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    client.post(reverse("courseapp:place", args=["cache"]), {"position": "30"})
    response = client.post(reverse("courseapp:signup"), {
        "username": "newbie", "password1": "a-long-password-42", "password2": "a-long-password-42"})
    assert response.status_code == 302
    rows = ModuleProgress.objects.filter(user__username="newbie")
    assert {r.module.slug for r in rows} == {"intro", "cache"}
    assert rows.get(module__slug="intro").completed
    assert not ModuleProgress.objects.filter(user=None).exists()
    assert QuizAttempt.objects.get().user.username == "newbie"


def test_progress_merged_on_login_keeps_best(client, course, student):
    intro = Module.objects.get(slug="intro")
    ModuleProgress.objects.create(user=student, module=intro, best_score=1)
    post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    client.post(reverse("login"), {"username": "student", "password": "student-pass-123"})
    progress = ModuleProgress.objects.get(user=student, module=intro)
    assert progress.best_score == 2 and progress.completed
    assert ModuleProgress.objects.count() == 1


def test_autoplay_preference_off_by_default(client, course, student):
    from courseapp.views import autoplay_preference

    client.force_login(student)
    request = client.get("/").wsgi_request
    assert autoplay_preference(request) is False
    client.post(reverse("courseapp:preferences"), {"autoplay": "on", "next": "/"})
    request = client.get("/").wsgi_request
    assert autoplay_preference(request) is True


def test_pages_work_without_javascript_forms(client, course):
    """Every student action is a plain HTML form posting to a server URL."""
    html = client.get(module_url("intro")).content.decode()
    assert f'action="{reverse("courseapp:quiz", args=["intro"])}#quiz"' in html
    assert 'type="radio" name="q1"' in html and 'type="checkbox" name="q2"' in html
    assert '<script type="module"' in html
    assert "cdn" not in html.lower()


def test_signup_and_login_pages(client, db):
    assert client.get(reverse("courseapp:signup")).status_code == 200
    assert client.get(reverse("login")).status_code == 200


# --- Quiz choices are shuffled per attempt; grading follows the order the student saw ------------------

CORRECT_TEXTS = {"For every request.", "Decode is memory-bound at batch 1.", "Prefill is parallel over the prompt."}


def shown_quiz(html: str) -> tuple[str, dict[str, list[tuple[str, str]]]]:
    """The attempt's signed seed and, per question field, the (value, label text) pairs in page order."""
    seed = re.search(r'name="quiz_seed" value="([^"]+)"', html).group(1)
    fields: dict[str, list[tuple[str, str]]] = {}
    pattern = r'name="(q\d+)" value="(\d+)" id="[^"]+"[^>]*>\s*<label for="[^"]+">(?:<p>)?(.*?)(?:</p>)?</label>'
    for name, value, text in re.findall(pattern, html):
        fields.setdefault(name, []).append((value, text))
    return seed, fields


def test_quiz_order_varies_between_attempts_and_grading_follows_it(client, course):
    orders = set()
    for _ in range(12):
        seed, fields = shown_quiz(client.get(module_url("intro")).content.decode())
        assert [v for v, _ in fields["q1"]] == ["1", "2"]  # values are positions, not authored orders
        orders.add(tuple(text for name in sorted(fields) for _, text in fields[name]))
        answers = {name: [v for v, text in pairs if text in CORRECT_TEXTS] for name, pairs in fields.items()}
        response = client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed, **answers})
        assert "You scored <strong>2/2</strong>" in response.content.decode()
        first_only = {name: ["1"] for name in fields}
        response = client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed, **first_only})
        assert "You scored <strong>2/2</strong>" not in response.content.decode()
    assert len(orders) > 1
    assert QuizAttempt.objects.filter(score=2).count() == 12
    # Stored by authored ids, whatever order the choices were shown in.
    assert all(a.answers["q-when"] == ["c-every-request"] for a in QuizAttempt.objects.filter(score=2))


def test_wrong_answer_explanation_matches_the_choice_picked_under_shuffling(client, course):
    for _ in range(6):
        seed, fields = shown_quiz(client.get(module_url("intro")).content.decode())
        wrong = next(v for v, text in fields["q1"] if text == "Once, like training.")
        html = client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed, "q1": wrong}).content.decode()
        assert "You scored <strong>0/2</strong>" in html
        assert "Training happens once; inference happens for every request." in html  # the picked choice's own
        assert QuizAttempt.objects.order_by("-pk").first().answers["q-when"] == ["c-once"]  # the wrong one


def test_always_the_first_choice_no_longer_passes_the_real_course(client, db):
    """In content/ the first authored choice is nearly always the correct one: shown shuffled, picking the first
    shown choice of every question scores full marks only by chance, and each question's order varies."""
    load_course(REPO_CONTENT)
    module = Module.objects.filter(questions__isnull=False).distinct().order_by("pk").first()
    slug, total = module.slug, module.questions.count()
    scores, first_shown = [], {}
    for _ in range(10):
        seed, fields = shown_quiz(client.get(module_url(slug)).content.decode())
        assert len(fields) == total
        for name, pairs in fields.items():
            first_shown.setdefault(name, set()).add(pairs[0][1])
        html = client.post(reverse("courseapp:quiz", args=[slug]),
                           {"quiz_seed": seed, **{name: ["1"] for name in fields}}).content.decode()
        scores.append(int(re.search(r"You scored <strong>(\d+)/", html).group(1)))
    assert sum(score == total for score in scores) < 3, scores
    assert all(len(texts) > 1 for texts in first_shown.values()), first_shown


@pytest.mark.parametrize("forge", ["missing", "unsigned", "tampered", "other-module", "garbage"])
def test_quiz_without_a_valid_signed_seed_is_refused(client, course, forge):
    """Without a seed the authored order would be graded (first choice correct); a forged or edited seed would
    let a script pick its own order. Each is refused with a 400 and records no attempt."""
    from courseapp.quiz import seed_token

    token, _ = shown_quiz(client.get(module_url("intro")).content.decode())
    seed = int(token.split(":")[0])
    data = {"q1": "1", "q2": ["1", "2"]}
    if forge == "unsigned":
        data["quiz_seed"] = str(seed)
    elif forge == "tampered":
        data["quiz_seed"] = f"{seed % 1000 + 1}:{token.split(':', 1)[1]}"
    elif forge == "other-module":
        data["quiz_seed"] = seed_token("cache", seed)
    elif forge == "garbage":
        data["quiz_seed"] = "²:x"
    response = client.post(reverse("courseapp:quiz", args=["intro"]), data)
    assert response.status_code == 400
    assert "out of date" in response.content.decode()
    assert not QuizAttempt.objects.exists()
    assert not ModuleProgress.objects.filter(completed_at__isnull=False).exists()


def test_graded_quiz_keeps_the_order_the_student_saw(client, course):
    seed, fields = shown_quiz(client.get(module_url("intro")).content.decode())
    response = client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed, "q1": "1"})
    again_seed, again = shown_quiz(response.content.decode())
    assert (again_seed, again) == (seed, fields)


@pytest.mark.parametrize("answers", [{"q1": "²"}, {"q1": "٣"}, {"q1": "x"}, {"q1": "-1"}, {"q1": "9"}])
def test_malformed_quiz_answer_is_a_clear_400(client, course, answers):
    seed, _ = shown_quiz(client.get(module_url("intro")).content.decode())
    answers = {"quiz_seed": seed, **answers}
    response = client.post(reverse("courseapp:quiz", args=["intro"]), answers)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'role="alert"' in html and ("not one of its choices" in html or "choices 1 to 2" in html)
    assert not QuizAttempt.objects.exists()
    fragment = client.post(reverse("courseapp:quiz", args=["intro"]), answers, HTTP_X_REQUESTED_WITH="fetch")
    assert fragment.status_code == 400 and fragment.content.decode().lstrip().startswith('<section class="quiz"')


def test_module_with_a_quiz_is_completed_only_by_passing_it(client, course):
    response = client.post(reverse("courseapp:complete", args=["intro"]))
    assert response.status_code == 302 and response["Location"].endswith("#quiz")
    assert not ModuleProgress.objects.filter(module__slug="intro", completed_at__isnull=False).exists()
    html = client.get(module_url("intro")).content.decode()
    assert "by passing its quiz: 2 of 2 correct" in html
    assert "2/2 correct completes this module" in html
    post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    assert ModuleProgress.objects.get(module__slug="intro").completed


# --- Error pages, navigation to the demos, index details ---------------------------------------------

def test_404_and_403_use_the_site_layout(client, course, settings):
    settings.DEBUG = False
    response = client.get("/no/such/page/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "Page not found" in html and 'class="site-header"' in html and "/no/such/page/" in html
    assert 'rel="icon" href="/static/favicon.svg"' in html
    response = client.get(reverse("authoring:list"))  # students may not author
    if response.status_code == 302:  # anonymous: to the login page; a student gets the 403
        from django.contrib.auth.models import User
        client.force_login(User.objects.create_user("learner", password="x-long-password-1"))
        response = client.get(reverse("authoring:list"))
    assert response.status_code == 403
    assert "You cannot open this page" in response.content.decode()
    assert 'class="site-header"' in response.content.decode()


@pytest.mark.parametrize("request_kind", ["too many fields", "disallowed host"])
def test_a_bad_request_gets_the_site_layout_not_djangos_bare_400(client, course, settings, request_kind):
    settings.DEBUG = False
    if request_kind == "too many fields":
        response = client.get("/search/?" + "&".join(f"f{i}=1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 5)))
    else:
        response = client.get("/", HTTP_HOST="evil.example")
    html = response.content.decode()
    assert response.status_code == 400
    assert "could not read this request" in html and 'class="site-header"' in html, html[:300]
    assert 'rel="icon" href="/static/favicon.svg"' in html


def test_the_favicon_is_the_sites_svg_also_at_favicon_ico(client, db):
    """Browsers and tools that ask for /favicon.ico directly get the site's icon, not a 404."""
    import xml.etree.ElementTree as ET

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    svg = ET.parse(Path(__file__).resolve().parents[2] / "static" / "favicon.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and svg.find("{http://www.w3.org/2000/svg}title") is not None


def test_500_page_renders_without_a_request_or_database():
    from django.template import loader

    html = loader.get_template("500.html").render({})
    assert "Something went wrong" in html and "/static/css/site.css" in html


def test_demo_pages_share_the_site_navigation_and_link_to_their_lessons(client, course):
    module = Module.objects.get(slug="intro")
    module.demos = [{"name": "kv-cache", "props": {}}]
    module.save()
    index = client.get("/demos/").content.decode()
    assert 'class="site-header"' in index and 'aria-current="page">Live demos' in index
    assert f'Lesson: <a href="{module_url("intro")}">' in index
    page = client.get("/demos/kv-cache/").content.decode()
    assert 'class="site-header"' in page and f'<a href="{module_url("intro")}">Introduction to inference</a>' in page
    assert 'href="/demos/"' in client.get("/").content.decode()  # the course links to the demos


def test_a_lessons_demo_links_to_its_own_page_and_to_every_demo(client):
    load_course(REPO_CONTENT)
    html = client.get(module_url("kv-cache")).content.decode()
    lesson = html[html.index('id="lesson"'):html.index('id="pager"')]
    embed = lesson[lesson.index('<div class="demo-embed" data-demo="kv-cache"'):]
    links = embed[:embed.index("</p>", embed.index("demo-embed-links"))]
    from demos.registry import get_spec

    assert f'<a href="/demos/kv-cache/">Open “{get_spec("kv-cache").title}” on its own page</a>' in links
    assert '<a href="/demos/">All live demos</a>' in links
    # The demo's own page leads back to the lesson.
    assert f'href="{module_url("kv-cache")}"' in client.get("/demos/kv-cache/").content.decode()


def test_index_shows_score_out_of_total_and_resumes_at_the_next_unfinished_module(client, course):
    post_quiz(client, "intro", {"q1": "1", "q2": ["1"]})
    html = client.get("/").content.decode()
    assert "Best quiz score 1/2" in html
    assert "Resume where you left off: Intro" in html  # visited, not finished
    post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    html = client.get("/").content.decode()
    assert "Best quiz score 2/2" in html
    assert "Resume where you left off: Caching" in html  # intro is done: carry on with the next one


def test_resume_after_finishing_the_last_module_goes_back_to_the_first_unfinished_one(client, course):
    client.get(module_url("intro"))  # visited, not finished
    client.post(reverse("courseapp:complete", args=["cache"]))  # the last module, finished just now
    html = client.get("/").content.decode()
    assert "Resume where you left off: Intro" in html and "Resume where you left off: Caching" not in html
    post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    assert "Resume where you left off" not in client.get("/").content.decode()  # nothing left to finish


def test_outline_lists_check_yourself_where_the_quiz_is(client, course):
    module = Module.objects.get(slug="intro")
    module.outline = [{"id": "one", "text": "One", "level": 2}, {"id": "sources", "text": "Sources", "level": 2}]
    from courseapp.models import QUIZ_MARKER

    module.html = '<h2 id="one">One</h2><p>x</p>' + QUIZ_MARKER + '<h2 id="sources">Sources</h2>'
    module.save()
    html = client.get(module_url("intro")).content.decode()
    start = html.index('class="outline"')
    nav = html[start:html.index("</nav>", start)]
    assert nav.index('href="#one"') < nav.index('href="#quiz"') < nav.index('href="#sources"')


def test_every_real_module_lists_its_sections_in_page_order(client):
    """"On this page" in the real course: every entry, "Check yourself" and "Sources" included, in the
    order the reader meets them."""
    load_course(REPO_CONTENT)
    checked_sources = 0
    for module in Module.objects.filter(draft=False):
        html = client.get(module_url(module.slug)).content.decode()
        start = html.index('class="outline"')
        nav = html[start:html.index("</nav>", start)]
        targets = re.findall(r'href="#([^"]+)"', nav)
        body = html[html.index("</nav>", start):]
        positions = [body.index(f'id="{target}"') for target in targets]
        assert positions == sorted(positions), (module.slug, targets)
        if "quiz" in targets and "sources" in targets:
            assert targets.index("quiz") < targets.index("sources"), module.slug
            checked_sources += 1
    assert checked_sources >= 5


def test_narration_being_generated_says_so_with_its_progress(client, course):
    from narration.models import Narration

    narration = Narration.objects.create(module=Module.objects.get(slug="cache"))
    html = client.get(module_url("cache")).content.decode()
    assert "being generated now (queued)" in html and "Narration not generated yet" not in html
    narration.status, narration.progress = Narration.Status.RUNNING, 0.4
    narration.save()
    assert "being generated now (40% done)" in client.get(module_url("cache")).content.decode()


def test_narration_state_is_polled_with_the_courses_count_until_the_player_comes(client, course):
    """What player.js polls while the audio is made: the page's state, a sentence, the course's count of
    narrated modules (the two published ones here), then the player's own HTML."""
    from django.core.files.base import ContentFile

    from narration.models import Narration

    url = reverse("courseapp:narration_state", args=["cache"])
    page = client.get(module_url("cache")).content.decode()
    assert f'data-status-url="{url}"' in page and 'data-state="missing"' in page
    assert "Narration not generated yet." in page and "<progress" not in page
    assert client.get(url).json()["state"] == "missing"

    intro = Narration.objects.create(module=Module.objects.get(slug="intro"), status=Narration.Status.READY)
    intro.audio.save("intro.wav", ContentFile(b"RIFF"), save=False)
    intro.vtt.save("intro.vtt", ContentFile(b"WEBVTT\n"), save=True)
    narration = Narration.objects.create(module=Module.objects.get(slug="cache"), status=Narration.Status.RUNNING,
                                         progress=0.25)
    state = client.get(url).json()
    assert state == {"state": "busy", "progress": 0.25, "ready": 1, "total": 2,
                     "message": "being generated now (25% done). Narration is ready for 1 of 2 modules. "
                                "The player appears here when this page's audio is ready."}
    page = client.get(module_url("cache")).content.decode()
    assert 'data-state="busy"' in page and 'class="narration-progress" max="1" value="0.25"' in page

    narration.status = Narration.Status.READY
    narration.audio.save("cache.wav", ContentFile(b"RIFF"), save=False)
    narration.vtt.save("cache.vtt", ContentFile(b"WEBVTT\n"), save=True)
    state = client.get(url).json()
    assert state["state"] == "ready" and '<audio id="narration-audio"' in state["player"]
    assert f'name="next" value="{module_url("cache")}"' in state["player"]  # the page, not this JSON
    assert client.get(reverse("courseapp:narration_state", args=["batching"])).status_code == 404  # a draft


def test_narration_queued_behind_a_long_queue_is_still_coming_unless_the_queue_stopped(client, course):
    from datetime import timedelta

    from django.utils import timezone

    from narration.models import Narration

    long_ago = timezone.now() - timedelta(minutes=25)
    Narration.objects.create(module=Module.objects.get(slug="cache"))
    other = Narration.objects.create(module=Module.objects.get(slug="intro"), status=Narration.Status.RUNNING,
                                     progress=0.5)
    Narration.objects.filter(module__slug="cache").update(updated_at=long_ago)  # queued 25 minutes ago
    state = client.get(reverse("courseapp:narration_state", args=["cache"])).json()
    assert state["state"] == "busy" and state["message"].startswith("being generated now (queued).")
    Narration.objects.filter(pk=other.pk).update(updated_at=long_ago)  # nothing has moved for 25 minutes
    state = client.get(reverse("courseapp:narration_state", args=["cache"])).json()
    assert state == {"state": "missing", "message": "Narration not generated yet.", "progress": None, "ready": 0,
                     "total": 0}


def test_csrf_failure_page_uses_the_site_layout(course, settings):
    from django.test import Client

    settings.DEBUG = False
    response = Client(enforce_csrf_checks=True).post(reverse("courseapp:quiz", args=["intro"]), {"q1": "1"})
    html = response.content.decode()
    assert response.status_code == 403
    assert "This form has expired" in html and 'class="site-header"' in html


# --- Anonymous visitors leave no rows until they act ---------------------------------------------------------------

LOOKING = ["/", "/modules/intro/", "/modules/cache/", "/modules/intro/narration/", "/search/?q=cache",
           "/demos/", "/demos/kv-cache/", "/demos/dashboard/", "/demos/runs/mine.json?demo=kv-cache",
           "/accounts/login/", "/accounts/signup/"]


def rows() -> tuple[int, int]:
    from django.contrib.sessions.models import Session

    return Session.objects.count(), ModuleProgress.objects.count()


def test_a_cookieless_visitor_who_only_looks_leaves_no_session_and_no_progress(client, course):
    from classes.stats import ANONYMOUS, DateRange, group_stats

    for path in LOOKING:
        for _ in range(3):  # no cookie sent back: each view is a new visitor, as for a crawler or a link preview
            client.cookies.clear()
            response = client.get(path)
            assert response.status_code == 200, path
            assert "sessionid" not in response.cookies, path
    assert rows() == (0, 0)
    assert group_stats(Module.objects.get(slug="intro"), DateRange.last_days(), ANONYMOUS).started == 0


def test_the_first_answer_makes_the_session_and_the_progress_and_csrf_still_guards_it(course):
    from classes.stats import ANONYMOUS, DateRange, group_stats
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    page = client.get(module_url("intro"))
    assert rows() == (0, 0) and client.cookies["csrftoken"].value  # the form's token lives in its own cookie
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    refused = client.post(reverse("courseapp:quiz", args=["intro"]), {"q1": "1"})
    assert refused.status_code == 403 and rows() == (0, 0)  # no token: refused, and nothing written
    from courseapp.quiz import new_seed, seed_token

    answered = client.post(reverse("courseapp:quiz", args=["intro"]),
                           {"csrfmiddlewaretoken": token, "quiz_seed": seed_token("intro", new_seed()), "q1": "1"})
    assert answered.status_code == 200 and rows() == (1, 1) and QuizAttempt.objects.count() == 1
    client.get(module_url("cache"))  # from now on a visit is recorded: "resume where you left off"
    assert rows() == (1, 2)
    assert group_stats(Module.objects.get(slug="intro"), DateRange.last_days(), ANONYMOUS).started == 1


def test_listening_or_a_bookmark_is_an_action_too(client, course):
    client.get(module_url("cache"))
    assert rows() == (0, 0)
    client.post(reverse("courseapp:place", args=["cache"]), {"position": "3"})  # the player saves its position
    assert rows() == (1, 1)


def test_a_signed_in_learners_page_views_are_recorded_as_before(client, course, student):
    client.force_login(student)
    client.get(module_url("intro"))
    assert ModuleProgress.objects.filter(user=student, module__slug="intro").exists()


def test_counts_of_one_are_singular(client, course):
    """ "1 of 1 modules" read wrong: a count of one takes the singular."""
    Module.objects.exclude(slug="intro").update(draft=True)
    html = client.get("/").content.decode()
    assert "0 of 1 module completed" in html and "1 modules" not in html
