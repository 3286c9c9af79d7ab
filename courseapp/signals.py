"""Merge an anonymous visitor's progress into the account when they log in or sign up (the search index follows
module saves in search/signals.py); note a saved module's exercises for the course map (practice.py)."""
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save
from django.dispatch import receiver

from .models import Module
from .practice import remember
from .progress import VISITOR_SESSION_KEY, merge_visitor


@receiver(user_logged_in, dispatch_uid="courseapp_merge_visitor_progress")
def merge_anonymous_progress(sender, request, user, **kwargs):
    if request is None or not hasattr(request, "session"):
        return
    visitor = request.session.pop(VISITOR_SESSION_KEY, "")
    merge_visitor(visitor, user)


@receiver(post_save, sender=Module, dispatch_uid="courseapp_practice_remember_exercises")
def remember_exercises(sender, instance, **kwargs):
    remember(instance)
