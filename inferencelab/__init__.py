# Load the Celery app with Django so `shared_task`s bind to it in every process (web, worker, shell).
from .celery import app as celery_app

__all__ = ("celery_app",)
