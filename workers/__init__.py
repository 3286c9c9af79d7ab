"""The Celery worker side: everything that runs in a demo or narration worker process, nothing the web side runs.

tasks.py: the `run_demo` task (take the next fair run, drive its runner, persist then publish) and the narration
tasks; run.py: one run's sync side (claim, step, finish); engine.py: the process's engine and its batching service;
serving.py: the loaded models and their batching services, shared by the task threads; stats.py: the worker's
published stats (the dashboard's and the consumer's view of it); heartbeat.py: a running run's heartbeat and cancel
check; startup.py: warm-up before the first run (readiness) and goodbye at shutdown; machine_profile.py: measuring
this machine while idle (measure.py: the measurements themselves, which bench/machine_roofline.py also runs).
serving.py and measure.py import neither Django nor Celery: bench scripts and tests use them without settings.

The web side (the `demos` app: specs, consumers, views, models) never imports this package (a demo runner is handed
the worker's loaded models); this package imports the web side's models, registry, Redis names (demos.runstate)
and admission policy (demos.admission).
"""
