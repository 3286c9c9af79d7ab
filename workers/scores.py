"""The `cpu` workers' side of LTI grades (lti/scores.py decides what is owed and how a post is sent).

`send_score` is the job a quiz answer queues. The sweep is a thread of every worker that consumes the `cpu` queue,
started when the worker is ready: every LTI_SCORE_SWEEP_INTERVAL seconds it sends the posts whose next try is due
(a platform that was down, a job that waited too long behind narration), so a score reaches an LMS that comes back
with nothing run by hand and no cron. Several workers may sweep: each post is claimed before it is sent.
"""
from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections

from demos.runstate import CPU_QUEUE
from lti import scores

log = logging.getLogger(__name__)


@shared_task(name=scores.SEND_TASK, ignore_result=True, acks_late=False)  # a lost job: the sweep sends the post
def send_score(post_pk: int) -> bool:
    close_old_connections()
    try:
        return scores.send(post_pk)
    finally:
        close_old_connections()


class ScoreSweep:
    """One daemon thread per worker process that sends due posts until the worker shuts down."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.stopping.clear()
            self.thread = threading.Thread(target=self._loop, name="lti-score-sweep", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        interval = float(getattr(settings, "LTI_SCORE_SWEEP_INTERVAL", 15))
        while not self.stopping.wait(interval):
            close_old_connections()
            try:
                sent, not_sent = scores.send_due()
                if sent or not_sent:
                    log.info("LTI score sweep: %s sent, %s not accepted yet", sent, not_sent)
            except Exception:  # noqa: BLE001 - a database hiccup: the next pass tries again
                log.exception("LTI score sweep failed")
            finally:
                close_old_connections()


SWEEP = ScoreSweep()


def consumes_cpu_queue(consumer) -> bool:
    try:
        return CPU_QUEUE in set(consumer.app.amqp.queues.consume_from)
    except Exception:  # noqa: BLE001 - unknown: sweep (claims keep two sweeps from sending a post twice)
        return True


@worker_ready.connect
def start_score_sweep(sender=None, **kwargs):
    if sender is None or consumes_cpu_queue(sender):
        SWEEP.start()


@worker_shutting_down.connect
def stop_score_sweep(sender=None, **kwargs):
    SWEEP.stop()
