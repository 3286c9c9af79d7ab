"""The `cpu` workers' side of LTI grades (lti/scores.py decides what is owed and how a post is sent).

`send_score` is the job a quiz answer queues. The sweep is a thread of every worker that consumes the `cpu` queue,
started when the worker is ready: every LTI_SCORE_SWEEP_INTERVAL seconds it sends the posts whose next try is due
(a platform that was down, a job that waited too long behind narration), so a score reaches an LMS that comes back
with nothing run by hand and no cron. Several workers may sweep: each post is claimed before it is sent.
A second sweep, alike, reads the LMS class lists when they are due (lti/roster.py: students who left the LMS
course are marked inactive), so the roster follows the LMS with no instructor launch either.
"""
from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections

from demos.runstate import CPU_QUEUE
from lti import roster, scores

log = logging.getLogger(__name__)


@shared_task(name=scores.SEND_TASK, ignore_result=True, acks_late=False)  # a lost job: the sweep sends the post
def send_score(post_pk: int) -> bool:
    close_old_connections()
    try:
        return scores.send(post_pk)
    finally:
        close_old_connections()


class Sweep:
    """One daemon thread per worker process that runs `one_pass` every `interval_setting` seconds until the worker
    shuts down; `one_pass` returns (done, not done), logged with `what` when either is non-zero."""

    def __init__(self, name: str, interval_setting: str, one_pass, what: str) -> None:
        self.name, self.interval_setting = name, interval_setting
        self.one_pass, self.what = one_pass, what
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.stopping.clear()
            self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        interval = float(getattr(settings, self.interval_setting))  # settings.py has each, read from the env
        while not self.stopping.wait(interval):
            close_old_connections()
            try:
                done, not_done = self.one_pass()
                if done or not_done:
                    log.info(self.what, done, not_done)
            except Exception:  # noqa: BLE001 - a database hiccup: the next pass tries again
                log.exception("%s failed", self.name)
            finally:
                close_old_connections()


SWEEP = Sweep("lti-score-sweep", "LTI_SCORE_SWEEP_INTERVAL", scores.send_due,
              "LTI score sweep: %s sent, %s not accepted yet")
# The LMS class lists (lti/roster.py): each is read when due (LTI_ROSTER_SYNC_EVERY); a pass looks every minute.
ROSTER_SWEEP = Sweep("lti-roster-sweep", "LTI_ROSTER_SWEEP_INTERVAL", roster.sync_due,
                     "LTI class list sweep: %s read, %s not read")


def consumes_cpu_queue(consumer) -> bool:
    try:
        return CPU_QUEUE in set(consumer.app.amqp.queues.consume_from)
    except Exception:  # noqa: BLE001 - unknown: sweep (claims keep two sweeps from sending a post twice)
        return True


@worker_ready.connect
def start_score_sweep(sender=None, **kwargs):
    if sender is None or consumes_cpu_queue(sender):
        SWEEP.start()
        ROSTER_SWEEP.start()


@worker_shutting_down.connect
def stop_score_sweep(sender=None, **kwargs):
    SWEEP.stop()
    ROSTER_SWEEP.stop()
