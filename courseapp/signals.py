"""Merge an anonymous visitor's progress into the account when they log in or sign up (the search index follows
module saves in search/signals.py)."""
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from .progress import VISITOR_SESSION_KEY, merge_visitor


@receiver(user_logged_in, dispatch_uid="courseapp_merge_visitor_progress")
def merge_anonymous_progress(sender, request, user, **kwargs):
    if request is None or not hasattr(request, "session"):
        return
    visitor = request.session.pop(VISITOR_SESSION_KEY, "")
    merge_visitor(visitor, user)
