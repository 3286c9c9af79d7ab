"""Code exercises: a function to write, "Run tests" on the `cpu` workers in a sandbox, each test's result shown.

catalog/ holds the exercises; sandbox.py (bubblewrap, seccomp, rlimits) runs harness.py on a student's code;
grading.py compares what came back with the expected values; runner.py runs the visible and hidden tests apart;
jobs.py/tasks.py queue and run a Submission; views.py serves the page and the run/poll endpoints; embed.py gives
the lesson renderer the widget.
"""
