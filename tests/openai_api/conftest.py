"""The OpenAI-compatible API's stack: real Redis, one Celery worker with the batching service's 16 slots (the real
engine) and Daphne on free ports, on the test database; `api_key(user)` makes a key as the account page does."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import Stack  # noqa: E402


@pytest.fixture(scope="module")
def api_stack(django_db_setup, tmp_path_factory):
    # A closed stream's run counts as orphaned 2 s after its last reader left (15 s by default).
    stack = Stack(tmp_path_factory.mktemp("openai-api-stack"), str(settings.DATABASES["default"]["TEST"]["NAME"]),
                  {"DEMO_ORPHAN_GRACE": "2"})
    try:
        stack.start_redis()
        stack.start_worker(name="api-worker", concurrency=16, queues="gpu")  # make run's -c 16: 16 sequence slots
        stack.url = stack.start_daphne()
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def make_key(transactional_db):
    """make_key(username) → (user, API key), a new account each name."""
    from django.contrib.auth import get_user_model

    from openai_api.keys import create_key

    def make(username: str):
        user = get_user_model().objects.create_user(username, password=None)
        return user, create_key(user, "test")[1]
    return make
