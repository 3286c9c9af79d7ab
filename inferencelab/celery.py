"""The Celery app. Queues: `gpu` runs engine work (one model per worker process), `cpu` the rest."""
import os
import sys

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
# A worker process starts here: passive OpenMP waiting, set before torch loads (see inference_core/__main__.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

app = Celery("inferencelab")
app.config_from_object("django.conf:settings", namespace="CELERY")
# workers/tasks.py: `run_demo`, the narration tasks and the start-up hooks; exercises/tasks.py: code exercises
app.autodiscover_tasks(["workers", "exercises"])
