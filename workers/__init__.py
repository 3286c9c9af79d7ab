"""The Celery worker side: everything that runs in a demo or narration worker process, nothing the web side runs.

tasks.py: the `run_demo` task (take the next fair run, drive its runner, persist then publish) and the narration
tasks; run.py: one run's sync side (claim, step, finish); engine.py: the process's engine and its batching service;
stats.py: the worker's published stats (the dashboard's and the consumer's view of it); heartbeat.py: a running
run's heartbeat and cancel check; startup.py: warm-up before the first run (readiness) and goodbye at shutdown;
machine_profile.py: measuring this machine while idle.

The web side (the `demos` app: specs, consumers, views, models) never imports this package; this package imports
the web side's models, registry, Redis names (demos.runstate) and admission policy (demos.admission).
"""
