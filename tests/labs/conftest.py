"""The course fixtures shared by the course's apps' tests (tests/course_fixtures.py)."""
from course_fixtures import *  # noqa: F401,F403
