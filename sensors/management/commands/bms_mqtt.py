"""manage.py bms_mqtt: ingest emonhub's MQTT topics (emon/<node>/<key>)."""

from __future__ import annotations

import argparse
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sensors.devices.mqtt import MqttIngestor
from sensors.devices.mqtt_auth import MqttAuth, MqttConfigError, is_loopback, read_secret_file


class Command(BaseCommand):
    help = (
        "Subscribe to emonhub's MQTT topics (emon/<node>/<key> with a number, or emon/<node> "
        "with a JSON object whose `time` is the readings' time) and ingest them like HTTP posts: readings are batched per node for "
        "--window seconds and handed to the ingest queue. Nodes must be registered "
        "(manage.py createnode); readings of unknown nodes are logged and dropped. "
        "Options default to the BMS_MQTT_* settings (docs/CONFIGURATION.md)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--host", default=settings.BMS_MQTT_HOST, help="MQTT broker (default 127.0.0.1)"
        )
        parser.add_argument(
            "--port", type=int, default=settings.BMS_MQTT_PORT or None,
            help="MQTT port (default 1883, or 8883 with --tls)",
        )  # fmt: skip
        parser.add_argument(
            "--topic", default="emon/#",
            help="Subscription (default emon/#); the base topic may have several levels, "
            "e.g. site1/emon/#, as emoncms's mqtt basetopic",
        )  # fmt: skip
        parser.add_argument(
            "--window", type=float, default=1.0, help="Seconds to batch a node's messages"
        )
        parser.add_argument(
            "--username", default=settings.BMS_MQTT_USERNAME,
            help="Broker login (default BMS_MQTT_USERNAME)",
        )  # fmt: skip
        parser.add_argument(
            "--password-file", default=None,
            help="File holding the broker password (default: BMS_MQTT_PASSWORD, or the file "
            "named by BMS_MQTT_PASSWORD_FILE). Never on the command line: ps shows it to all.",
        )  # fmt: skip
        parser.add_argument(
            "--tls", action=argparse.BooleanOptionalAction, default=settings.BMS_MQTT_TLS,
            help="Connect over TLS, verifying the broker's certificate and name",
        )  # fmt: skip
        parser.add_argument(
            "--ca-file", default=settings.BMS_MQTT_CA_FILE,
            help="CA certificate(s) for the broker (default: the system's)",
        )  # fmt: skip
        parser.add_argument(
            "--cert-file", default=settings.BMS_MQTT_CERT_FILE, help="Client certificate (PEM)"
        )
        parser.add_argument(
            "--key-file", default=settings.BMS_MQTT_KEY_FILE, help="Client certificate's key"
        )

    def handle(self, *args, **opts) -> None:
        port = opts["port"] or (8883 if opts["tls"] else 1883)
        if not 1 <= port <= 65535:
            raise CommandError(f"--port: {port} is not a TCP port (1-65535)")
        if not 0 < opts["window"] <= 3600:
            raise CommandError(f"--window: {opts['window']} must be above 0 and at most 3600")
        try:
            password = (
                read_secret_file(opts["password_file"])
                if opts["password_file"]
                else settings.BMS_MQTT_PASSWORD
            )
            auth = MqttAuth(
                username=opts["username"], password=password, tls=opts["tls"],
                ca_file=opts["ca_file"], cert_file=opts["cert_file"], key_file=opts["key_file"],
            )  # fmt: skip
            auth.check()
        except MqttConfigError as exc:
            raise CommandError(str(exc)) from None
        if auth.password and not auth.tls and not is_loopback(opts["host"]):
            self.stderr.write(
                f"Warning: the MQTT password goes to {opts['host']} in clear text; use --tls "
                "(docs/SECURITY.md)"
            )
        ingestor = MqttIngestor(opts["host"], port, opts["topic"], opts["window"], auth=auth)
        signal.signal(signal.SIGTERM, ingestor.request_stop)
        signal.signal(signal.SIGINT, ingestor.request_stop)
        login = f" as {auth.username}" if auth.username else ""
        scheme = "mqtts" if auth.tls else "mqtt"
        self.stdout.write(
            f"Subscribing to {opts['topic']} on {scheme}://{opts['host']}:{port}{login}"
        )
        ingestor.run()
        if ingestor.refused:
            raise CommandError(f"the MQTT broker refused the login: {ingestor.refused}")
        s = ingestor.stats
        self.stdout.write(
            f"Stopped: {s.messages} messages, {s.batches} batches, {s.rejected} rejected, "
            f"{s.unknown_nodes} for unknown nodes"
        )
