"""Narration jobs show their place in the queue, an instructor's job for one module goes ahead of a bulk
regeneration, and a caption is fixed in place without new audio."""
from __future__ import annotations

import html

import pytest
from django.core.management import call_command
from django.urls import reverse

from narration import synthesis as narration
from courseapp.models import Module
from narration.models import Narration
from narration.jobs import GENERATE_TASK, run_narration
from workers.narration import generate_narration

from test_course_narration import FakeVoice

pytestmark = pytest.mark.django_db


@pytest.fixture
def tickets(monkeypatch):
    """The Celery messages sent to the `cpu` queue, kept here (no broker in these tests): a worker would
    run `generate_narration` once per message, in any order."""
    sent = []

    def send_task(name, args, **kwargs):
        assert name == GENERATE_TASK and kwargs["queue"] == "cpu"
        sent.append(args[0])
        return type("R", (), {"id": f"t{len(sent)}"})()

    # The broker client itself, not `narration_jobs.send`: the narrate command holds its own reference to that.
    monkeypatch.setattr("narration.jobs.app.send_task", send_task)
    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    return sent


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def state(client, slug: str) -> dict:
    return client.get(reverse("authoring:narration_status", args=[slug])).json()


def test_an_instructors_job_shows_its_place_and_goes_ahead_of_bulk_regeneration(author, tickets):
    call_command("narrate", "intro", "cache", "--queue")  # `make run` regenerating the course, in bulk
    assert [state(author, slug)["position"] for slug in ("intro", "cache")] == [1, 2]
    assert state(author, "cache")["label"] == "Queued: 1 job(s) ahead of it"

    response = author.post(reverse("authoring:narrate", args=["batching"]))  # a new module, later
    assert response.status_code == 302
    mine = state(author, "batching")
    assert mine["position"] == 1 and mine["label"] == "Queued: next to run"
    assert [state(author, slug)["position"] for slug in ("intro", "cache")] == [2, 3]

    # A worker takes the tickets in the order the broker gives them: the first one runs the instructor's job.
    generate_narration(tickets[0])
    assert Narration.objects.get(module__slug="batching").status == Narration.Status.READY
    assert Narration.objects.get(module__slug="intro").status == Narration.Status.PENDING
    assert state(author, "intro")["position"] == 1
    for ticket in tickets[1:]:
        generate_narration(ticket)
    assert set(Narration.objects.values_list("status", flat=True)) == {Narration.Status.READY}
    generate_narration(tickets[0])  # a spare ticket (a job queued twice) finds nothing to do
    assert set(Narration.objects.values_list("status", flat=True)) == {Narration.Status.READY}


def test_the_list_page_shows_the_queue_position(author, tickets):
    call_command("narrate", "--all", "--queue")
    page = html.unescape(author.get(reverse("authoring:list")).content.decode())
    assert "Queued: next to run" in page and "Queued: 1 job(s) ahead of it" in page


def test_a_caption_is_edited_in_place_without_new_audio(author, client, monkeypatch):
    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    record = run_narration(Module.objects.get(slug="intro").pk)
    audio, vtt = record.audio.name, record.vtt.name
    page = html.unescape(author.get(reverse("authoring:edit", args=["intro"])).content.decode())
    assert 'name="text" value="Why it matters"' in page

    response = author.post(reverse("authoring:caption", args=["intro"]),
                           {"cue": "c2", "text": "Inference runs for every single request."})
    assert response.status_code == 302
    record.refresh_from_db()
    assert record.audio.name == audio and record.vtt.name != vtt and record.is_ready
    captions = client.get(record.vtt_url)
    body = b"".join(captions.streaming_content).decode() if captions.streaming else captions.content.decode()
    assert "c2\n" in body and "Inference runs for every single request." in body
    assert "Why it matters" in body  # the other cues are unchanged

    bad = author.post(reverse("authoring:caption", args=["intro"]), {"cue": "c2", "text": "  "})
    assert bad.status_code == 400 and "A caption cannot be empty" in html.unescape(bad.content.decode())
    missing = author.post(reverse("authoring:caption", args=["intro"]), {"cue": "c99", "text": "x"})
    assert missing.status_code == 400 and "no caption 'c99'" in html.unescape(missing.content.decode())
