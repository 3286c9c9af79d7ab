"""`:::{exercise} <id>` in a lesson: the exercise's widget where the directive stands, and an author's mistake named
at its line."""
from __future__ import annotations

import pytest

from courseapp.rendering import ContentError, render_markdown

pytestmark = pytest.mark.django_db


def test_the_directive_embeds_the_exercise_widget():
    html = render_markdown("Intro.\n\n:::{exercise} kv-cache-bytes\n:::\n\nAfter.\n").html
    assert 'data-exercise="kv-cache-bytes"' in html and 'class="exercise-code"' in html
    assert "/exercises/kv-cache-bytes/run/" in html and "js/exercises/exercise.js" in html
    assert html.index("Intro.") < html.index('data-exercise="kv-cache-bytes"') < html.index("After.")


@pytest.mark.parametrize("source, line, message", [
    ("Text.\n\n:::{exercise} no-such-thing\n:::\n", 3, "unknown exercise: no exercise 'no-such-thing'"),
    ("Text.\n\n\n:::{exercise} sampler\n{\"hints\": true}\n:::\n", 4, "takes no props"),
])
def test_an_authors_mistake_is_named_at_its_line(source, line, message):
    with pytest.raises(ContentError) as caught:
        render_markdown(source)
    assert caught.value.line == line and message in caught.value.message


def test_every_exercise_the_course_embeds_renders_in_its_lesson(client):
    from django.core.management import call_command

    call_command("loadcourse", verbosity=0)
    for slug, exercise in (("kv-cache", "kv-cache-bytes"), ("paged-attention", "paged-block-allocator"),
                           ("prefill-decode", "roofline"), ("speculative-decoding", "speculative-acceptance"),
                           ("primer", "sampler")):
        page = client.get(f"/modules/{slug}/")
        assert page.status_code == 200 and f'data-exercise="{exercise}"' in page.content.decode(), slug
