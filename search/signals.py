"""Keep the search index current when a module is saved (loaded, edited, published, restored) or deleted."""
from django.db import connections
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from courseapp.models import Module

from . import index


@receiver(post_save, sender=Module, dispatch_uid="search_reindex")
def reindex_saved_module(sender, instance, raw=False, using="default", **kwargs):
    if raw:  # loaddata: the fixture's rows may not be complete yet; rebuild_search_index afterwards
        return
    index.reindex_module(instance.pk, connections[using])


@receiver(post_delete, sender=Module, dispatch_uid="search_remove")
def unindex_deleted_module(sender, instance, using="default", **kwargs):
    index.remove_module(instance.pk, connections[using])
