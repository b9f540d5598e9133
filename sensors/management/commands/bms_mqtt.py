"""manage.py bms_mqtt: ingest emonhub's MQTT topics (emon/<node>/<key>)."""

from __future__ import annotations

import signal

from django.core.management.base import BaseCommand

from sensors.mqtt import MqttIngestor


class Command(BaseCommand):
    help = (
        "Subscribe to emonhub's MQTT topics (emon/<node>/<key> with a number, or emon/<node> "
        "with a JSON object) and ingest them like HTTP posts: readings are batched per node for "
        "--window seconds and handed to the ingest queue. Nodes must be registered "
        "(manage.py createnode); readings of unknown nodes are logged and dropped."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="MQTT broker (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=1883, help="MQTT port (default 1883)")
        parser.add_argument("--topic", default="emon/#", help="Subscription (default emon/#)")
        parser.add_argument(
            "--window", type=float, default=1.0, help="Seconds to batch a node's messages"
        )

    def handle(self, *args, **opts) -> None:
        ingestor = MqttIngestor(opts["host"], opts["port"], opts["topic"], opts["window"])
        signal.signal(signal.SIGTERM, ingestor.request_stop)
        signal.signal(signal.SIGINT, ingestor.request_stop)
        self.stdout.write(f"Subscribing to {opts['topic']} on {opts['host']}:{opts['port']}")
        ingestor.run()
        s = ingestor.stats
        self.stdout.write(
            f"Stopped: {s.messages} messages, {s.batches} batches, {s.rejected} rejected, "
            f"{s.unknown_nodes} for unknown nodes"
        )
