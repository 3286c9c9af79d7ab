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
app.autodiscover_tasks(["demos"])  # demos/tasks.py: `run_demo`; courseapp registers its own in ready()


@worker_init.connect
def _short_gil_turns(**kwargs):
    """The worker's threads take turns on the GIL every settings.GIL_SWITCH_INTERVAL (see there)."""
    from django.conf import settings

    sys.setswitchinterval(settings.GIL_SWITCH_INTERVAL)
