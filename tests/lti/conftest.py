"""Fixtures for the LTI tests: the fixture course, a simulated platform registered with the tool."""
from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from django.core.management import call_command
from lti_platform import Platform

from courseapp.loader import load_course

FIXTURE_COURSE = Path(__file__).resolve().parents[1] / "courseapp" / "fixtures" / "valid"


@pytest.fixture(autouse=True)
def fresh_cache():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def no_broker():
    """A score's job goes to a broker nobody listens on: it is not queued (logged), and nothing here can reach a
    Redis some `make run` on this machine left running; its post stays pending for the worker's sweep. The tests
    with a real broker and worker aim the app at theirs after this (tests/lti/test_scores_worker.py)."""
    from inferencelab.celery import app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = app.conf.broker_url
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    yield
    app.conf.broker_url = before


@pytest.fixture
def course(db, tmp_path):
    target = tmp_path / "content"
    shutil.copytree(FIXTURE_COURSE, target)
    load_course(target)
    return target


@pytest.fixture
def platform(db, client):
    platform = Platform()
    call_command("lti_add_platform", title="Test LMS", issuer=platform.issuer, client_id=platform.client_id,
                 login_url=platform.login_url, token_url=platform.token_url, jwks_url=platform.jwks_url,
                 deployment=[platform.deployment_id])
    platform.tool_jwks = client.get("/lti/jwks/").json()  # what the admin pastes/links in the LMS
    yield platform
    platform.close()
