"""The Celery app. Queues: `gpu` runs engine work (one model per worker process), `cpu` the rest."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

app = Celery("inferencelab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["demos"])  # demos/tasks.py: `run_demo`; courseapp registers its own in ready()
