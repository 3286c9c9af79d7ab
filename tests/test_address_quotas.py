"""What one client address may make: password-reset requests answer the same whether or not an account has the
address (and send nothing for one that must not get a password by e-mail), and visitor sessions are counted per
address, sized so a class behind one NAT gets theirs while a flood makes no rows."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core import mail
from django.test import Client

from courseapp.password_reset import outbox

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _sent() -> list:
    outbox.submit(lambda: None).result(timeout=30)  # the mail thread has done all it was given
    return mail.outbox


def test_a_reset_answers_the_same_for_known_and_unknown_addresses(client):
    User.objects.create_user("kim", email="kim@example.org", password="kim-pass-12345")
    known = client.post("/accounts/password_reset/", {"email": "kim@example.org"}, follow=True)
    unknown = Client().post("/accounts/password_reset/", {"email": "nobody@example.org"}, follow=True)
    assert [r.status_code for r in (known, unknown)] == [200, 200]
    assert known.redirect_chain == unknown.redirect_chain == [("/accounts/password_reset/done/", 302)]
    assert known.content == unknown.content and b"If an account has that address" in known.content
    [message] = _sent()
    assert message.to == ["kim@example.org"] and "/accounts/reset/" in message.body


def test_accounts_without_a_usable_password_get_no_reset_mail(client):
    """An LTI account or an import's account not yet taken over gets a password only from its owner's link."""
    lti = User.objects.create_user("lti-0a1b2c", email="lee@school.example")
    lti.set_unusable_password()
    lti.save()
    response = client.post("/accounts/password_reset/", {"email": "lee@school.example"})
    assert response.status_code == 302 and _sent() == []


def test_reset_requests_are_counted_per_address_whatever_the_address_typed(client, settings):
    settings.PASSWORD_RESETS_PER_ADDRESS = 3
    User.objects.create_user("kim", email="kim@example.org", password="kim-pass-12345")
    for n in range(3):
        assert client.post("/accounts/password_reset/", {"email": f"guess{n}@example.org"}).status_code == 302
    for email in ("kim@example.org", "another@example.org"):
        refused = client.post("/accounts/password_reset/", {"email": email})
        assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
        assert "Too many password-reset requests" in refused.content.decode()
    assert _sent() == []
    assert Client(REMOTE_ADDR="198.51.100.7").post("/accounts/password_reset/",
                                                     {"email": "kim@example.org"}).status_code == 302


def test_a_class_behind_one_address_gets_a_session_each():
    for _ in range(60):
        response = Client(REMOTE_ADDR="203.0.113.10").post("/demos/visitor/")
        assert response.status_code == 200 and response.json() == {"created": True}
    assert Session.objects.count() == 60


def test_a_visitor_flood_from_one_address_makes_no_rows_past_the_quota(settings):
    settings.VISITOR_SESSIONS_PER_ADDRESS = 20
    for _ in range(20):
        assert Client().post("/demos/visitor/").status_code == 200
    refused = Client().post("/demos/visitor/")
    assert refused.status_code == 429 and refused.json()["error"] == "too_many_visitors"
    assert int(refused["Retry-After"]) > 0
    assert Session.objects.count() == 20
    returning = Client()  # a visitor who has a session asks again: nothing new is made, nothing is refused
    assert Client(REMOTE_ADDR="192.0.2.1").post("/demos/visitor/").status_code == 200
    assert returning.post("/demos/visitor/").status_code == 429
    settings.VISITOR_SESSIONS_PER_ADDRESS = 21
    assert returning.post("/demos/visitor/").json() == {"created": True}
    assert returning.post("/demos/visitor/").json() == {"created": False}
