"""A module's practice: the labs and exercises its lesson holds, and whether the learner has done each one (a lab
once they submitted it, an exercise once one of their runs of it passed every test), for the course map and the
progress on the course index.

Labs are rows (`labs.models.Lab`, replaced on every save). Exercises are not stored per module: they are read from
the module's rendered HTML (each embedded widget carries `data-exercise`), once per module version (when it is saved
in this process, else at the first index view after), so an exercise written anywhere in a lesson counts and one
shown only as code in a fenced block does not. An exercise
passed once counts as done in every module that embeds it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from demos.identity import TOKEN_KEY, owners_for_request
from exercises import catalog
from exercises.models import Submission
from labs.models import Lab, LabAttempt

from .models import Module

# The widget's own element (templates/exercises/_widget.html); lesson text cannot make one (raw HTML is off).
EXERCISE_RE = re.compile(r'<section class="exercise"[^>]*\sdata-exercise="([a-z0-9][a-z0-9_-]*)"')
KINDS = {"lab": "Lab", "exercise": "Exercise"}

# module pk → (its updated_at, the exercise ids its HTML embeds): the HTML is read again only when the module changed.
_exercises_seen: dict[int, tuple[object, tuple[str, ...]]] = {}


@dataclass(frozen=True)
class PracticeItem:
    kind: str  # "lab" or "exercise"
    key: str  # the lab's id in its module, or the exercise's id
    title: str
    done: bool

    @property
    def kind_label(self) -> str:
        return KINDS[self.kind]

    @property
    def anchor(self) -> str:
        """The id of its section on the module page (the renderer's `lab-ID`, the widget's `exercise-ID`)."""
        return f"{self.kind}-{self.key}"


def exercise_ids(html: str) -> tuple[str, ...]:
    """The exercises a lesson's HTML embeds, in page order, each once."""
    return tuple(dict.fromkeys(EXERCISE_RE.findall(html)))


def remember(module: Module) -> None:
    """On every module save (courseapp/signals.py): note the exercises of the HTML just saved, so the index reads no
    HTML for it in this process; a module saved without its HTML loaded is read again when next needed."""
    if "html" in module.get_deferred_fields():
        _exercises_seen.pop(module.pk, None)
    else:
        _exercises_seen[module.pk] = (module.updated_at, exercise_ids(module.html))


def _exercises_by_module(modules: list[Module]) -> dict[int, tuple[str, ...]]:
    stale = [m.pk for m in modules if _exercises_seen.get(m.pk, (None,))[0] != m.updated_at]
    if stale:
        for pk, html, updated_at in Module.objects.filter(pk__in=stale).values_list("pk", "html", "updated_at"):
            _exercises_seen[pk] = (updated_at, exercise_ids(html))
    return {m.pk: _exercises_seen.get(m.pk, (None, ()))[1] for m in modules}


def exercise_owners(request) -> tuple[str, ...]:
    """Whose exercise runs are this request's (as the exercise pages read them), creating no session."""
    if not request.user.is_authenticated and not request.session.get(TOKEN_KEY):
        return ()
    return owners_for_request(request)


def practice_by_module(modules: list[Module], learner, owners: tuple[str, ...]) -> dict[int, list[PracticeItem]]:
    """Each module's labs then exercises, in lesson order, with whether `learner` (courseapp.progress.Learner: who
    submits labs) and `owners` (who runs exercises) have done them: a query for the labs, one for the modules' HTML
    when a module changed since it was last read, one for passed exercises when there are any, whatever the number
    of modules."""
    pks = [m.pk for m in modules]
    mine = LabAttempt.objects.for_learner(learner).filter(module_id=OuterRef("module_id"), lab_key=OuterRef("key"),
                                                          submitted_at__isnull=False)
    labs = list(Lab.objects.filter(module_id__in=pks).order_by("module_id", "order")
                .annotate(submitted=Exists(mine)).values_list("module_id", "key", "definition__title", "submitted"))
    embedded = _exercises_by_module(modules)
    wanted = {e for ids in embedded.values() for e in ids}
    passed = set(Submission.objects.filter(owner__in=owners, passed=True, exercise_id__in=wanted)
                 .values_list("exercise_id", flat=True).distinct()) if owners and wanted else set()
    practice: dict[int, list[PracticeItem]] = {pk: [] for pk in pks}
    for module_id, key, title, submitted in labs:
        practice[module_id].append(PracticeItem("lab", key, title or key, submitted))
    for module_id, ids in embedded.items():
        for exercise_id in ids:
            exercise = catalog.get(exercise_id)
            if exercise is not None:
                practice[module_id].append(PracticeItem("exercise", exercise_id, exercise.title,
                                                        exercise_id in passed))
    return practice
