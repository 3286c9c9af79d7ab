"""Merge an anonymous visitor's progress into the account when they log in or sign up; keep the search index
current when a module is saved (loaded, edited, published, restored) or deleted."""
from django.contrib.auth.signals import user_logged_in
from django.db import connections
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from . import search
from .models import Module
from .progress import VISITOR_SESSION_KEY, merge_visitor


@receiver(user_logged_in, dispatch_uid="courseapp_merge_visitor_progress")
def merge_anonymous_progress(sender, request, user, **kwargs):
    if request is None or not hasattr(request, "session"):
        return
    visitor = request.session.pop(VISITOR_SESSION_KEY, "")
    merge_visitor(visitor, user)


@receiver(post_save, sender=Module, dispatch_uid="courseapp_search_reindex")
def reindex_saved_module(sender, instance, raw=False, using="default", **kwargs):
    if raw:  # loaddata: the fixture's rows may not be complete yet; rebuild_search_index afterwards
        return
    search.reindex_module(instance.pk, connections[using])


@receiver(post_delete, sender=Module, dispatch_uid="courseapp_search_remove")
def unindex_deleted_module(sender, instance, using="default", **kwargs):
    search.remove_module(instance.pk, connections[using])
