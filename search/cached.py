"""Search results kept per query until the course changes (issue 38: a flood of searches must not slow a live run).

The key holds the query, whether drafts are shown, and the course's version: the newest `updated_at` of any module
and how many there are, and the index's row count and newest row. Every save bumps a module's `updated_at` (an edit, a publish or unpublish, a soft delete or
its undo, a restore, an import, `loadcourse`), and a delete from the admin changes the count, so results are never
served from before a change. The version is read from the database on each search, so every web process agrees
(a per-process cache, several Daphnes).
"""
from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Max

from courseapp.models import Module

from . import index

CACHE_SECONDS = 600
SEARCHES = {"count": 0}  # how many queries reached the full-text index (tests count them)


def course_version() -> str:
    """The modules' newest save and count, and the index's size and newest row (`rebuild_search_index` rebuilds
    it without saving a module)."""
    row = Module.all_objects.aggregate(newest=Max("updated_at"), n=Count("id"))
    version = f"{row['newest'].isoformat() if row['newest'] else '-'}:{row['n']}"
    rowid = "rowid" if connection.vendor == "sqlite" else "id"
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a failure leaves no broken transaction
            cursor.execute(f"SELECT count(*), max({rowid}) FROM {index.TABLE}")
            rows, newest_row = cursor.fetchone()
    except DatabaseError:  # no index (yet): `index.search` answers nothing, whatever the key
        return f"{version}:-"
    return f"{version}:{rows}:{newest_row}"


def search(q: str, *, show_drafts: bool) -> list[index.Hit]:
    digest = hashlib.sha256(q.encode()).hexdigest()[:32]  # any query text makes a valid, bounded key
    key = f"search:{course_version()}:{int(show_drafts)}:{digest}"
    hits = cache.get(key)
    if hits is None:
        SEARCHES["count"] += 1
        hits = index.search(q, show_drafts=show_drafts)
        cache.set(key, hits, CACHE_SECONDS)
    return hits
