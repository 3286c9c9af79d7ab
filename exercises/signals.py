"""Signals the exercises app sends, for apps that act on a graded run without exercises knowing them (lti sends
the score to an LMS)."""
from django.dispatch import Signal

# Sent by exercises/jobs.py once a submission is graded (status `done`), with `submission` (the stored row).
submission_graded = Signal()
