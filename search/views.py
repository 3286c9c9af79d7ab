"""The search page: the visitor's words against the index (`index.search`), drafts shown to instructors only."""
from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from courseapp.instructors import PERMISSION

from . import cached
from .index import MAX_QUERY_CHARS, MAX_RESULTS, SPACE_RE, query_terms


@require_GET
def search_view(request):
    raw = request.GET.get("q", "")
    q = SPACE_RE.sub(" ", raw[:MAX_QUERY_CHARS]).strip()
    show_drafts = request.user.has_perm(PERMISSION)  # as courseapp.views._visible_modules
    results = cached.search(q, show_drafts=show_drafts) if q else []  # per query, until the course changes
    return render(request, "search/search.html", {
        "q": q,
        "searched": bool(q),
        "has_words": bool(query_terms(q)),
        "truncated": len(raw) > MAX_QUERY_CHARS,
        "max_chars": MAX_QUERY_CHARS,
        "results": results,
        "capped": len(results) == MAX_RESULTS,
    })
