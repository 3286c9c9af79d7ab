"""The issue's goal end to end: an instructor adds a module by Deep Linking, a student opens the link the LMS
made from the answer, lands in the module, passes its quiz, and the platform's AGS endpoint receives the score."""
from __future__ import annotations

import html
import re

import jwt
from django.test import Client
from lti_platform import CLAIM, DL, INSTRUCTOR, LEARNER, launch, post_quiz

from lti import scores


def test_deep_link_then_student_launch_then_score_back(course, platform, django_capture_on_commit_callbacks):
    teacher = Client()
    picker = launch(teacher, platform, platform.deep_link_claims("teach-goal", INSTRUCTOR)).content.decode()
    launch_id = html.unescape(re.search(r'name="launch_id" value="([^"]*)"', picker).group(1))
    answer = teacher.post("/lti/deep-link/", {"launch_id": launch_id, "module": ["intro"]}).content.decode()
    token = html.unescape(re.search(r'name="JWT" value="([^"]*)"', answer).group(1))
    [item] = jwt.decode(token, options={"verify_signature": False})[DL + "content_items"]  # verified elsewhere

    # The LMS turns the item into a resource link with a grade column, and a student opens it.
    claims = platform.resource_claims("stu-goal", LEARNER, target=item["url"], lineitem="intro-column")
    claims[CLAIM + "custom"] = item["custom"]
    student = Client()
    landed = launch(student, platform, claims)
    assert landed["Location"] == "/modules/intro/"
    assert student.get(landed["Location"]).status_code == 200

    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(student, "intro", {"q1": "1", "q2": ["1", "2"]})
    assert scores.send_pending() == (1, 0)  # what the `cpu` worker does (tests/lti/test_scores_worker.py)
    [score] = platform.scores
    assert score["path"] == "/lineitems/intro-column/scores"
    assert {k: score["body"][k] for k in ("scoreGiven", "scoreMaximum", "userId", "activityProgress",
                                           "gradingProgress")} == {
        "scoreGiven": 2, "scoreMaximum": item["lineItem"]["scoreMaximum"], "userId": "stu-goal",
        "activityProgress": "Completed", "gradingProgress": "FullyGraded"}
