"""kombu's Redis transport, with channels that outlive their connection's teardown (CELERY_BROKER_TRANSPORT).

When the broker connection drops (Redis killed or restarted), Celery 5.7's consumer first `collect()`s the
connection, which detaches the transport from it (`transport.client = None`), then `close()`s it, which closes the
channel. Closing a channel that still holds unacknowledged deliveries (late-acked demo runs in flight) restores
them, and a channel builds its Redis pool from `transport.client`: kombu's `_connparams` then fails with
AttributeError ('NoneType' object has no attribute 'hostname'), which is no connection error, so it escapes
Celery's error handling: "Unrecoverable error", a warm shutdown that waits for every run in flight while no new
run is taken, and exit status 1. The runs in flight hit the same error when they finish and ack.

Here a channel keeps the connection parameters it was made with. Closing it after a connection loss then meets a
connection error (Redis is down) that kombu and Celery ignore, as they mean to, and the consumer reconnects by
itself; a run in flight acks through its channel's own pool once Redis is back, so its ticket leaves the
`unacked` hash instead of coming back after the visibility timeout.
"""
from __future__ import annotations

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _kept_params: dict | None = None

    def _connparams(self, asynchronous=False):
        if self.connection.client is None:  # detached by Connection.collect() after a connection loss
            if asynchronous or self._kept_params is None:
                # Only the consumer's poller uses the asynchronous pool, and it is being replaced.
                raise redis.exceptions.ConnectionError("the broker connection of this channel was closed")
            return dict(self._kept_params)
        params = super()._connparams(asynchronous=asynchronous)
        if not asynchronous:
            self._kept_params = dict(params)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel
