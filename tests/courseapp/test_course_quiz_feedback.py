"""Quiz feedback a student can trust: a partly right multiple-choice answer is never "✓ Correct", it says what
was missed, and a retry reveals the right answer; an empty submission is not graded."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from courseapp.models import ModuleProgress, QuizAttempt

from test_course_pages import post_quiz, shown_quiz

pytestmark = pytest.mark.django_db


def question(html: str, number: int) -> str:
    match = re.search(rf'<fieldset class="question[^"]*" id="question-{number}">.*?</fieldset>', html, re.S)
    assert match, f"question {number} not on the page"
    return match[0]


def choice(fieldset: str, text: str) -> str:
    match = re.search(rf'<li class="choice[^"]*">(?:(?!</li>).)*{re.escape(text)}(?:(?!</li>).)*</li>', fieldset, re.S)
    assert match, text
    return match[0]


def test_half_right_multi_select_says_what_was_missed_and_never_correct(client, course):
    html = post_quiz(client, "intro", {"q1": "1", "q2": ["1"]}).content.decode()
    q2 = question(html, 2)
    assert 'class="question is-incorrect"' in q2
    assert "✓ Correct" not in q2
    assert "✗ Not yet right." in q2
    assert "You chose 1 of the 2 right answers: 1 right answer is still missing." in q2
    assert "✓ One of the right answers" in choice(q2, "Decode is memory-bound at batch 1.")
    missed = choice(q2, "Prefill is parallel over the prompt.")
    assert "is-missed" not in missed and "All prompt tokens go through in one pass." not in missed  # not yet shown
    assert "after another try the right answer is shown" in q2
    assert "✓ Correct." in question(html, 1)  # the right one is
    assert QuizAttempt.objects.get().score == 1


def test_a_wrong_pick_beside_the_right_ones_is_counted(client, course):
    html = post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2", "3"]}).content.decode()
    q2 = question(html, 2)
    assert "You chose 2 of the 2 right answers and 1 wrong one." in q2 and "✓ Correct" not in q2
    assert "✗ Not quite" in choice(q2, "Decode is compute-bound at batch 1.")


def test_a_retry_reveals_the_right_answer(client, course):
    post_quiz(client, "intro", {"q1": "2", "q2": ["1"]})
    html = post_quiz(client, "intro", {"q1": "2", "q2": ["1"]}).content.decode()
    q2 = question(html, 2)
    assert "The right answers are marked below." in q2
    missed = choice(q2, "Prefill is parallel over the prompt.")
    assert 'class="choice is-missed"' in missed and "→ The right answer (you missed it)" in missed
    assert "All prompt tokens go through in one pass." in missed  # its explanation
    assert "Decode is compute-bound" in q2 and "is-missed" not in choice(q2, "Decode is compute-bound at batch 1.")
    q1 = question(html, 1)
    assert "The right answer is marked below." in q1
    assert 'class="choice is-missed"' in choice(q1, "For every request.")
    assert "Yes, each request needs a forward pass per generated token." in q1
    assert QuizAttempt.objects.count() == 2


@pytest.mark.parametrize("fragment", [False, True])
def test_an_empty_submission_is_not_graded(client, course, fragment):
    seed, fields = shown_quiz(client.get(reverse("courseapp:module", args=["intro"])).content.decode())
    extra = {"HTTP_X_REQUESTED_WITH": "fetch"} if fragment else {}
    response = client.post(reverse("courseapp:quiz", args=["intro"]), {"quiz_seed": seed}, **extra)
    html = response.content.decode()
    assert response.status_code == 400
    assert "Choose an answer to at least one question before checking: nothing was graded." in html
    assert "You scored" not in html and "Not answered." not in html
    assert not QuizAttempt.objects.exists()
    assert not ModuleProgress.objects.filter(best_score__isnull=False).exists()
    assert shown_quiz(html) == (seed, fields)  # the same quiz, in the same order, to answer
