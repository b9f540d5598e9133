"""kombu's Redis transport, with a channel that still closes when the broker went away.

Found by tests/reliability/test_redis_restart.py: a Redis restart during ingest stopped the
Celery worker for good ("Unrecoverable error: AttributeError: 'NoneType' object has no
attribute 'hostname'", exit code 1). What kombu 5.7 does when the connection drops:

1. Celery's consumer first `collect()`s the broken connection. kombu's `Channel.close()` starts
   by reading the reply of the BRPOP it has in flight (there is one whenever the worker has a
   free slot); on a dead socket that read raises ConnectionError, and the close stops there:
   the channel is left open, its unacknowledged messages not restored.
2. `collect()` then detaches the transport from its connection (`transport.client = None`).
3. Celery closes the connection, which closes the same channel again. This time it gets as far
   as restoring the messages it holds unacknowledged (an acks_late task that is running or
   reserved), which needs a new Redis client, whose parameters come from `transport.client`:
   AttributeError, which is not a connection error, so it escapes Celery's cleanup and the
   worker exits. Nothing is lost (the batches are in Redis and in the ingest outbox), but no
   worker consumes until someone restarts it.

Here the failed read of the in-flight BRPOP ends that read only, and the close goes on at once
(step 1), while the transport still knows its connection. Restoring the unacknowledged messages
then fails with an ordinary ConnectionError (Redis is down), which Celery's cleanup expects and
ignores; the messages stay in kombu's `unacked` hash, where kombu's visibility timeout (and for
ingest batches the outbox, sensors/publish.py) brings them back. The worker reconnects.

Used for `redis://` brokers (settings.CELERY_BROKER_TRANSPORT); `rediss://` keeps kombu's own
transport, because naming a transport class turns off kombu's TLS defaults for that scheme.
"""

from __future__ import annotations

import logging
from queue import Empty

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)


class Channel(kombu_redis.Channel):
    def close(self):
        if self._in_poll and not self.closed:
            try:
                self._brpop_read()  # as kombu's close does: a message in the reply is delivered
            except Empty:
                log.debug("closing channel: the BRPOP in flight returned no message")
            except self.connection_errors as exc:
                # The reply died with the connection; _brpop_read has cleared _in_poll, so the
                # close below runs through instead of stopping here.
                log.warning("broker connection lost with a BRPOP in flight (%r): closing", exc)
        super().close()


class Transport(kombu_redis.Transport):
    Channel = Channel
