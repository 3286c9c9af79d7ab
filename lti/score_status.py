"""What the gradebook says about the scores owed to an LMS: per student and module, the state of the newest post to
each grade column (pending / sent / failed) with the LMS's answer, read in one query for the whole class."""
from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from django.utils.formats import date_format

from .models import ScorePost

# The cell's state is its worst post's: a failed post needs a teacher, a pending one only time.
_ORDER = {ScorePost.State.FAILED: 0, ScorePost.State.PENDING: 1, ScorePost.State.SENT: 2}


def _when(moment) -> str:
    return date_format(timezone.localtime(moment), "j M Y, H:i") if moment else ""


def describe(post: ScorePost) -> str:
    """One post in words, with the LMS's answer."""
    score = f"{post.score_given}/{post.score_maximum}"
    tries = f"{post.tries} tr{'y' if post.tries == 1 else 'ies'}"
    if post.state == ScorePost.State.SENT:
        return f"{score} sent {_when(post.sent_at)} ({tries}). The LMS answered: {post.answer or 'accepted'}"
    if post.state == ScorePost.State.FAILED:
        return f"{score} not accepted after {tries}; no further tries. The LMS answered: {post.answer}"
    if not post.tries:
        return f"{score} waiting to be sent (queued {_when(post.created_at)})."
    return (f"{score} not accepted yet ({tries}); next try {_when(post.next_try_at) or 'soon'}. "
            f"The LMS answered: {post.answer}")


@dataclass(frozen=True)
class LmsScore:
    """The newest live post to each grade column a student's module (and activity) is sent to."""

    posts: tuple[ScorePost, ...]

    @property
    def state(self) -> str:
        return min((post.state for post in self.posts), key=_ORDER.__getitem__)

    @property
    def label(self) -> str:
        return ScorePost.State(self.state).label.lower()

    @property
    def details(self) -> list[tuple[ScorePost, str]]:
        return [(post, describe(post)) for post in self.posts]

    @property
    def summary(self) -> str:
        return " ".join(describe(post) for post in self.posts)


def lms_scores_by_activity(user_ids: list[int]) -> dict[tuple[int, int, str], LmsScore]:
    """(user id, module id, activity) → its LmsScore, for every post of these students, in one query."""
    newest: dict[tuple[int, int, str], ScorePost] = {}
    posts = ScorePost.objects.filter(identity__user_id__in=user_ids).exclude(state=ScorePost.State.SUPERSEDED) \
        .select_related("resource_link", "identity").order_by("created_at", "pk")
    for post in posts:
        newest[(post.identity.user_id, post.resource_link_id, post.activity)] = post  # the last one wins
    grouped: dict[tuple[int, int, str], list[ScorePost]] = {}
    for (user_id, _link, activity), post in newest.items():
        grouped.setdefault((user_id, post.resource_link.module_id, activity), []).append(post)
    return {key: LmsScore(tuple(posts)) for key, posts in grouped.items()}


def lms_scores(user_ids: list[int], activity: str = "quiz") -> dict[tuple[int, int], LmsScore]:
    """(user id, module id) → the LmsScore of `activity`."""
    return {(uid, mid): score for (uid, mid, kind), score in lms_scores_by_activity(user_ids).items()
            if kind == activity}
