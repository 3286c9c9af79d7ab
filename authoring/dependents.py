"""What depends on a module: what an unpublish or a delete would break, said before it happens.

Students reach a module through other modules' links (`[text](slug.md)` or `/modules/slug/`), through its
place as a prerequisite, through the glossary links every lesson gets when the module is the glossary, and
from their own progress in it. `breakages` lists each of these that would stop working for students.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from courseapp.glossary import GLOSSARY_SLUG, parse_terms
from courseapp.models import Module, ModuleProgress, QuizAttempt


@dataclass
class Breakage:
    what: str  # one sentence: what stops working
    modules: list[Module] = field(default_factory=list)  # the modules it happens in, to link to them


def _links_to(slug: str) -> re.Pattern:
    return re.compile(rf"\]\(\s*(?:\./)?{re.escape(slug)}\.md(?:#[^)\s]*)?\s*\)|/modules/{re.escape(slug)}/")


def breakages(module: Module) -> list[Breakage]:
    """What students lose if `module` stops being published (or is deleted), most visible first."""
    found: list[Breakage] = []
    others = list(Module.objects.published().exclude(pk=module.pk).in_course_order())
    if module.slug == GLOSSARY_SLUG:
        terms = len(parse_terms(module.source))
        found.append(Breakage(f"The glossary's {terms} terms stop being linked from every lesson (their "
                              "definitions on hover and the links to the glossary disappear)."))
    linking = [m for m in others if _links_to(module.slug).search(m.source)]
    if linking:
        found.append(Breakage(f"{len(linking)} published module(s) link to it: those links will lead to a "
                              "“not found” page.", linking))
    requiring = [m for m in others if module.slug in (m.prerequisites or [])]
    if requiring:
        found.append(Breakage(f"{len(requiring)} published module(s) list it as a prerequisite: students will "
                              "see a prerequisite they cannot open.", requiring))
    learners = ModuleProgress.objects.filter(module=module).count()
    attempts = QuizAttempt.objects.filter(module=module).count()
    if learners or attempts:
        found.append(Breakage(f"{learners} learner(s) have started it and {attempts} quiz attempt(s) were made: "
                              "they can no longer open it (their records are kept)."))
    return found
