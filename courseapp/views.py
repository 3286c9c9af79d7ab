"""Student-facing pages: course index, module page, quiz grading, progress, preferences, sign-up."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth import login
from django.db.models import Count, Prefetch
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe

from inferencelab import address_quota, login_throttle
from narration.status import narration_status

from . import progress as tracking
from .completion import completion_for, started_summary
from .course_map import build_course_map
from .forms import PreferenceForm, SignupForm
from .glossary import glossary_terms
from .lesson_cache import lesson_parts
from .models import Choice, Module, Preference, Question, QuizAttempt, Track
from .practice import exercise_owners, practice_by_module
from .quiz import (SEED_FIELD, NothingChosen, QuizInputError, QuizResult, grade, new_seed, parse_seed, pass_mark,
                   seed_token, shuffled)


# --- View models (templates only display what these prepare) ------------------------------


@dataclass
class ModuleCard:
    module: Module
    completed: bool
    best_score: int | None
    question_count: int
    prerequisites: list[dict]
    narration_minutes: int | None
    practice: list | tuple = ()  # its labs and exercises, each with whether the learner did it (courseapp/practice.py)
    completion_summary: str = ""  # what is met and what is left, for a started module not complete yet (completion.py)

    @property
    def missing_prerequisites(self) -> list[dict]:
        return [p for p in self.prerequisites if not p["completed"]]


def _narration_minutes(module: Module) -> int | None:
    narration = getattr(module, "narration", None)
    if narration is None or not narration.is_ready:
        return None
    return max(1, round(narration.duration / 60))


def _visible_modules(request):
    return Module.objects.visible_to(request.user)


def _prerequisite_info(module: Module, by_slug: dict[str, Module], progress: dict) -> list[dict]:
    info = []
    for slug in module.prerequisite_slugs:
        other = by_slug.get(slug)
        if other is None:
            continue
        done = other.pk in progress and progress[other.pk].completed
        info.append({"module": other, "completed": done})
    return info


@require_GET
def course_index(request):
    learner = tracking.Learner.from_request(request)
    modules = list(_visible_modules(request).in_course_order().select_related("narration")
                   .annotate(question_count=Count("questions"))
                   .defer("source", "html", "outline", "cues", "demos"))
    progress = tracking.progress_by_module(learner)
    practice = practice_by_module(modules, learner, exercise_owners(request))
    by_slug = {m.slug: m for m in modules}
    tracks: dict[int, dict] = {}
    for track in Track.objects.order_by("order", "slug"):
        tracks[track.pk] = {"track": track, "cards": []}
    for module in modules:
        entry = progress.get(module.pk)
        tracks[module.track_id]["cards"].append(ModuleCard(
            module=module,
            completed=bool(entry and entry.completed),
            best_score=entry.best_score if entry else None,
            question_count=module.question_count,
            prerequisites=_prerequisite_info(module, by_slug, progress),
            narration_minutes=_narration_minutes(module),
            practice=practice[module.pk],
            completion_summary=started_summary(module.question_count, entry, practice[module.pk]),
        ))
    visible = {m.pk: m for m in modules}
    mine = [p for p in progress.values() if p.module_id in visible]
    done = sum(1 for p in mine if p.completed)
    return render(request, "courseapp/index.html", {
        "tracks": [t for t in tracks.values() if t["cards"]],
        "resume": _resume_module(modules, mine),
        "completed_count": done,
        "module_count": len(modules),
        "practice_count": sum(len(items) for items in practice.values()),
        "practice_done": sum(item.done for items in practice.values() for item in items),
        "course_map": build_course_map(card for t in tracks.values() for card in t["cards"]),
    })


def _resume_module(modules: list[Module], mine: list) -> Module | None:
    """The module to carry on with: the last one visited, or, when that one is complete, the first
    incomplete module after it in course order, else the first incomplete one before it (None when every
    module is complete)."""
    last = max(mine, key=lambda p: p.visited_at, default=None)
    if last is None:
        return None
    completed = {p.module_id for p in mine if p.completed}
    start = next(i for i, m in enumerate(modules) if m.pk == last.module_id)
    return next((m for m in modules[start:] + modules[:start] if m.pk not in completed), None)


def _module_or_404(request, slug: str) -> Module:
    queryset = _visible_modules(request).defer("source").select_related("track", "narration").prefetch_related(
        Prefetch("questions", queryset=Question.objects.order_by("order").prefetch_related(
            Prefetch("choices", queryset=Choice.objects.order_by("order"))
        ))
    )
    return get_object_or_404(queryset, slug=slug)


def quiz_items(questions, result: QuizResult | None, seed: int | None) -> list[dict]:
    """Everything the quiz template shows, per question and choice (graded or not), in this attempt's order."""
    items = []
    for question in questions:
        outcome = result.outcome_for(question) if result else None
        shown = [c.choice for c in outcome.choices] if outcome else shuffled(question, seed)
        choices = []
        for position, choice in enumerate(shown, start=1):
            choice_outcome = outcome.choices[position - 1] if outcome else None
            choices.append({
                "choice": choice,
                "value": position,
                "input_id": f"{question.field_name}-{position}",
                "checked": bool(choice_outcome and choice_outcome.selected),
                "verdict": choice_outcome.verdict if choice_outcome else "",
                "show_explanation": bool(choice_outcome and choice_outcome.show_explanation),
            })
        if outcome is None:
            status = ""
        elif not outcome.answered:
            status = "unanswered"
        else:
            status = "correct" if outcome.correct else "incorrect"
        items.append({
            "question": question,
            "number": question.order,
            "input_type": "checkbox" if question.multiple else "radio",
            "choices": choices,
            "status": status,
            "outcome": outcome,  # found/missed/wrong_picked/revealed, for the feedback on a wrong answer
        })
    return items


def _pager(request, module: Module) -> tuple[Module | None, Module | None]:
    order = list(_visible_modules(request).in_course_order().only("slug", "title", "short_title", "track"))
    index = next(i for i, m in enumerate(order) if m.pk == module.pk)
    previous = order[index - 1] if index > 0 else None
    following = order[index + 1] if index + 1 < len(order) else None
    return previous, following


def autoplay_preference(request) -> bool:
    if request.user.is_authenticated:
        pref = Preference.objects.filter(user=request.user).only("autoplay").first()
        return bool(pref and pref.autoplay)
    return bool(request.session.get(tracking.AUTOPLAY_SESSION_KEY, False))


def _resume_section(module: Module, progress) -> dict | None:
    """The outline entry the learner last read, unless that is where the page starts anyway."""
    if progress is None or not progress.last_section or not module.outline:
        return None
    if progress.last_section == module.outline[0]["id"]:
        return None
    return next((item for item in module.outline if item["id"] == progress.last_section), None)


def _player_context(request, module: Module, narration, mine) -> dict:
    """What `_player.html` shows: the player once the audio is ready, else the narration's status."""
    ready = narration is not None and narration.is_ready
    autoplay = autoplay_preference(request)
    return {
        "module": module,
        "narration": narration if ready else None,
        "narration_status": None if ready else narration_status(narration, request.user),
        "resume_position": mine.audio_position if mine else 0.0,
        "autoplay": autoplay,
        "preference_form": PreferenceForm(initial={"autoplay": autoplay}),
        "player_next": module.get_absolute_url(),
    }


@require_GET
def narration_state(request, slug: str):
    """The page's narration while it is being generated (polled by player.js): state, message, the course's
    count of narrated modules, and the player's HTML once the audio is ready."""
    module = _module_or_404(request, slug)
    narration = getattr(module, "narration", None)
    mine = tracking.get_progress(tracking.Learner.from_request(request), module)
    context = _player_context(request, module, narration, mine)
    status = context["narration_status"]
    if status is None:
        return JsonResponse({"state": "ready",
                             "player": render_to_string("courseapp/_player.html", context, request=request)})
    return JsonResponse(status.as_dict())


def module_context(request, module: Module, result: QuizResult | None = None, *, seed: int | None = None,
                   quiz_error: str = "") -> dict:
    """`seed` orders the quiz's choices: a graded or refused attempt keeps the order the student saw;
    a fresh page gets a fresh order."""
    learner = tracking.Learner.from_request(request)
    progress = tracking.progress_by_module(learner)
    mine = progress.get(module.pk)
    questions = list(module.questions.all())
    practice = practice_by_module([module], learner, exercise_owners(request))[module.pk]
    completion = completion_for(len(questions), mine.best_score if mine else None, practice,
                                marked=bool(mine and mine.completed))
    if completion.met and mine is not None and not mine.completed:  # e.g. a visitor's exercise passed meanwhile
        mine = tracking.mark_complete(learner, module)
    prereq_modules = {m.slug: m for m in _visible_modules(request).filter(slug__in=module.prerequisite_slugs)}
    prerequisites = _prerequisite_info(module, prereq_modules, progress)
    previous, following = _pager(request, module)
    narration = getattr(module, "narration", None)
    # The same for every visitor, built once per module version and machine profile (lesson_cache.py).
    parts = lesson_parts(module)
    if result is not None:
        seed = result.seed
    elif seed is None:
        seed = new_seed()
    return {
        "module": module,
        "lesson_before": parts.lesson_before,
        "lesson_after": parts.lesson_after,
        "outline_before": parts.outline_before,
        "outline_after": parts.outline_after,
        "prerequisites": prerequisites,
        "missing_prerequisites": [p for p in prerequisites if not p["completed"]],
        "previous": previous,
        "next": following,
        "progress": mine,
        "completion": completion,
        "quiz": quiz_items(questions, result, seed),
        "quiz_seed": seed,
        "quiz_seed_token": seed_token(module.slug, seed),
        "quiz_seed_field": SEED_FIELD,
        "quiz_error": quiz_error,
        "quiz_result": result,
        "quiz_pass_mark": pass_mark(len(questions)),
        "quiz_total": len(questions),
        **_player_context(request, module, narration, mine),
        "resume_section": _resume_section(module, mine),
        "needs_plotly": module.has_interactive,
        "calculator_scripts": parts.calculator_scripts,
        "glossary_terms": glossary_terms(),
    }


@require_GET
def module_detail(request, slug: str):
    module = _module_or_404(request, slug)
    learner = tracking.Learner.from_request(request)
    if learner.known:  # a visitor becomes a learner by acting (quiz, completion, bookmark, narration), not by looking
        tracking.touch(learner, module)
    return render(request, "courseapp/module.html", module_context(request, module))


def _wants_fragment(request) -> bool:
    return request.headers.get("X-Requested-With") == "fetch"


@require_POST
def quiz_submit(request, slug: str):
    """Grade on the server. Without JS: the whole page again; with quiz.js: the quiz fragment.

    An answer that names no choice of its question is refused with a 400 and the quiz shown again.
    """
    module = _module_or_404(request, slug)
    questions = list(module.questions.all())
    if not questions:
        raise Http404("This module has no quiz")
    template = "courseapp/_quiz.html" if _wants_fragment(request) else "courseapp/module.html"
    try:
        seed = parse_seed(request.POST.get(SEED_FIELD), module.slug)
        result = grade(questions, request.POST, seed)
    except NothingChosen as error:  # not graded: the same order again, nothing recorded
        return render(request, template, module_context(request, module, seed=seed, quiz_error=str(error)), status=400)
    except QuizInputError as error:
        context = module_context(request, module, seed=new_seed(), quiz_error=str(error))
        return render(request, template, context, status=400)
    learner = tracking.Learner.from_request(request, create=True)
    if QuizAttempt.objects.filter(module=module, **learner.owner()).exists():
        result.reveal_answers()  # a retry: what is still wrong shows its right answer
    tracking.record_attempt(learner, module, result, exercise_owners(request))
    return render(request, template, module_context(request, module, result))


@require_POST
def module_complete(request, slug: str):
    """Modules without a quiz are completed by hand once their labs and exercises are done; a module with a quiz is
    completed by passing it (and doing them), courseapp/completion.py."""
    module = _module_or_404(request, slug)
    questions = list(module.questions.all())
    if questions:
        messages.error(request, f"Complete “{module.label}” by passing its quiz: "
                                f"{pass_mark(len(questions))} of {len(questions)} correct.")
        return redirect(reverse("courseapp:module", args=[module.slug]) + "#quiz")
    state = tracking.settle(tracking.Learner.from_request(request, create=True), module, exercise_owners(request),
                            marked=True)
    if not state.met:
        messages.error(request, f"“{module.label}” is complete once its practice is done: {state.summary}.")
        return redirect(reverse("courseapp:module", args=[module.slug]) + "#pager")
    messages.success(request, f"“{module.label}” marked as complete.")
    return redirect(reverse("courseapp:module", args=[module.slug]) + "#pager")


@require_POST
def save_place(request, slug: str):
    """Where the learner is in a module: `position` (audio seconds) and/or `section` (a heading id)."""
    module = _module_or_404(request, slug)
    seconds = section = None
    if "position" in request.POST:
        try:
            seconds = float(request.POST["position"])
        except ValueError:
            return HttpResponseBadRequest("position must be a number of seconds")
        if not 0 <= seconds < 24 * 3600:
            return HttpResponseBadRequest("position out of range")
    if "section" in request.POST:
        section = request.POST["section"]
        if section not in {item["id"] for item in module.outline}:
            return HttpResponseBadRequest("section must be the id of one of the module's headings")
    if seconds is None and section is None:
        return HttpResponseBadRequest("send position and/or section")
    tracking.save_place(tracking.Learner.from_request(request, create=True), module, seconds=seconds,
                        section=section)
    return JsonResponse({"ok": True, "position": seconds, "section": section})


def _safe_next(request, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                       require_https=request.is_secure()):
        return target
    return fallback


@require_POST
def preferences(request):
    form = PreferenceForm(request.POST)
    if form.is_valid():
        autoplay = form.cleaned_data["autoplay"]
        if request.user.is_authenticated:
            Preference.objects.update_or_create(user=request.user, defaults={"autoplay": autoplay})
        else:
            request.session[tracking.AUTOPLAY_SESSION_KEY] = autoplay
        messages.success(request, "Autoplay turned on." if autoplay else "Autoplay turned off.")
    return redirect(_safe_next(request, reverse("courseapp:index")))


@require_http_methods(["GET", "POST"])
def signup(request):
    if request.user.is_authenticated:
        return redirect("courseapp:index")
    if request.method == "POST" and (wait := address_quota.SIGNUP.wait(request)):
        # Checked before the form: a flood of sign-ups costs no password hashing and creates nothing.
        message = (f"Too many new accounts from your network address. Try again in "
                   f"{login_throttle.wait_message(wait)}.")
        response = render(request, "registration/signup.html", {"form": SignupForm(), "throttle_message": message,
                                                                 "next": request.POST.get("next", "")}, status=429)
        response["Retry-After"] = str(wait)
        return response
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        address_quota.SIGNUP.record(request)
        # Two backends are configured (the sign-in throttle's and the model's): name the one that loads users.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")  # merges progress (signals.py)
        messages.success(request, f"Welcome, {user.username}! Your progress so far is saved to your account.")
        return redirect(_safe_next(request, reverse("courseapp:index")))
    return render(request, "registration/signup.html", {"form": form, "next": request.GET.get("next", "")})

