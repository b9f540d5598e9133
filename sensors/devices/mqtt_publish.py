"""publish_to_mqtt: values an input process publishes, through the MQTT client of bms_mqtt.

emoncms's process stores the value in the Redis hash `publish_to_mqtt` (topic -> value) and
its MQTT daemon (phpmqtt_input.php) publishes what it finds there; we do the same: the ingest
worker queues (`queue`), the `bms_mqtt` command publishes (`publish_pending`) on the broker
connection it already holds, with the same settings (BMS_MQTT_*). Latest value per topic
wins, as in emoncms: a slow broker gets the newest value, never a backlog.

Redis: sensors:mqtt-publish   hash topic -> value as text
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from core.redis import get_redis

log = logging.getLogger(__name__)

PUBLISH_KEY = "sensors:mqtt-publish"
# At most this many topics wait at once; more are dropped with a warning (a process list
# cannot make Redis grow without bound through topics).
MAX_PENDING_TOPICS = 10_000

# Take the whole hash atomically, so a value queued meanwhile waits for the next round.
_TAKE = """
local all = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return all
"""


def queue(published: Iterable[tuple[str, int, float | None]]) -> int:
    """Queue (topic, t, value) for publishing; a null is not published. Returns how many."""
    latest = {topic: repr(value) for topic, _t, value in published if value is not None}
    if not latest:
        return 0
    redis = get_redis()
    if redis.hlen(PUBLISH_KEY) >= MAX_PENDING_TOPICS:
        log.warning("publish_to_mqtt: %d topics wait already; %d dropped", MAX_PENDING_TOPICS,
                    len(latest))  # fmt: skip
        return 0
    redis.hset(PUBLISH_KEY, mapping=latest)
    return len(latest)


def publish_pending(client) -> int:
    """Publish every queued value on a connected paho client; returns how many."""
    redis = get_redis()
    flat = redis.register_script(_TAKE)(keys=[PUBLISH_KEY])
    count = 0
    for topic, value in zip(flat[::2], flat[1::2], strict=True):
        client.publish(topic.decode(), value, qos=0)
        count += 1
    return count
