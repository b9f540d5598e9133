"""bms_mqtt logs in to a broker that demands it: a private Mosquitto (the Debian package) on
free ports, anonymous refused, a password file made by mosquitto_passwd, and a TLS listener
with a certificate from a throw-away CA made by openssl."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from django.core.management import CommandError, call_command

from sensors.devices.mqtt import MqttIngestor
from sensors.devices.mqtt_auth import (
    MQTT_FIELD_MAX_BYTES,
    MqttAuth,
    MqttConfigError,
    apply_auth,
    read_secret_file,
)
from tests.live_http import free_port
from tests.processes import stop_process
from tests.sensors.conftest import make_node, queued_batches
from tests.tls_certs import make_ca_and_server_cert
from tests.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "emonhub", "s3cret-broker-pw"

needs_mosquitto = pytest.mark.skipif(
    not (
        shutil.which("mosquitto") and shutil.which("mosquitto_passwd") and shutil.which("openssl")
    ),
    reason="mosquitto, mosquitto_passwd and openssl are installed by bms_setup --for-tests",
)


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float = 10) -> None:
    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"mosquitto exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    wait_for(listening, timeout_s, f"mosquitto to listen on {port}", every_s=0.05)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A Mosquitto that refuses anonymous clients: plain listener and TLS listener."""
    if not (shutil.which("mosquitto") and shutil.which("mosquitto_passwd")):
        pytest.skip("no mosquitto")
    directory = tmp_path_factory.mktemp("mosquitto")
    make_ca_and_server_cert(directory)
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(directory / "passwd"), USER, PASSWORD],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    plain, tls = free_port(), free_port()
    (directory / "mosquitto.conf").write_text(
        f"""user {getpass.getuser()}
per_listener_settings false
allow_anonymous false
password_file {directory}/passwd
persistence false
log_dest file {directory}/mosquitto.log
listener {plain} 127.0.0.1
listener {tls} 127.0.0.1
cafile {directory}/ca.pem
certfile {directory}/server.pem
keyfile {directory}/server.key
"""
    )
    proc = subprocess.Popen(["mosquitto", "-c", str(directory / "mosquitto.conf")])
    try:
        _wait_for_port(plain, proc)
        _wait_for_port(tls, proc)
        yield {"plain": plain, "tls": tls, "dir": directory}
    finally:
        stop_process(proc)


def _publish(port: int, topic: str, payload: str, **tls) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    client.username_pw_set(USER, PASSWORD)
    if tls:
        client.tls_set(ca_certs=tls["ca"])
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1).wait_for_publish(5)
    finally:
        client.loop_stop()
        client.disconnect()


def _ingest_one(port: int, auth: MqttAuth, publish_tls: dict) -> MqttIngestor:
    base = f"t{uuid.uuid4().hex[:8]}"
    ingestor = MqttIngestor(port=port, topic=f"{base}/#", window_s=0.1, auth=auth)
    ingestor.start()
    try:
        assert ingestor.connected.wait(10), "could not log in and subscribe"
        _publish(port, f"{base}/emontx1/power1", "42", **publish_tls)
        wait_for(lambda: ingestor.stats.messages >= 1, 10, "the message", every_s=0.02)
    finally:
        ingestor.stop()  # flushes every pending batch
    return ingestor


@needs_mosquitto
@pytest.mark.django_db(transaction=True)
def test_password_login_reaches_the_ingest_queue(broker, redis_client):
    node, _ = make_node("emontx1", node_id=10)
    ingestor = _ingest_one(broker["plain"], MqttAuth(username=USER, password=PASSWORD), {})
    assert ingestor.refused is None
    assert queued_batches(redis_client) == [[node.pk, [[pytest.approx(time.time(), abs=30),
                                                        {"power1": 42.0}]]]]  # fmt: skip


@needs_mosquitto
@pytest.mark.django_db(transaction=True)
def test_tls_with_the_brokers_ca_and_a_password(broker, redis_client):
    node, _ = make_node("emontx1", node_id=10)
    ca = str(broker["dir"] / "ca.pem")
    auth = MqttAuth(username=USER, password=PASSWORD, tls=True, ca_file=ca)
    ingestor = _ingest_one(broker["tls"], auth, {"ca": ca})
    batches = queued_batches(redis_client)
    assert ingestor.refused is None and len(batches) == 1 and batches[0][0] == node.pk


@needs_mosquitto
def test_tls_refuses_a_broker_certificate_from_another_ca(broker, tmp_path):
    """The certificate is verified: the system CAs (no --ca-file) do not know the test CA."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    apply_auth(client, MqttAuth(username=USER, password=PASSWORD, tls=True))
    with pytest.raises(ssl.SSLCertVerificationError):
        client.connect("127.0.0.1", broker["tls"])


def _run_command(*args: str) -> subprocess.CompletedProcess:
    """manage.py bms_mqtt as its own process (it runs until stopped, so a timeout fails)."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bms.settings_test")
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "bms_mqtt", *args],
        capture_output=True, text=True, timeout=30, env=env, cwd=ROOT,
    )  # fmt: skip


@needs_mosquitto
@pytest.mark.parametrize("password", [None, "wrong-password"])
def test_command_stops_with_a_clear_error_when_the_login_is_refused(broker, tmp_path, password):
    """Anonymous and a wrong password are refused by the broker; the command says so and stops
    instead of reconnecting forever."""
    args = ["--port", str(broker["plain"]), "--topic", "nothing/#"]
    if password:
        (tmp_path / "pw").write_text(password + "\n")
        args += ["--username", USER, "--password-file", str(tmp_path / "pw")]
    result = _run_command(*args)
    assert result.returncode == 1, result.stderr
    assert "the MQTT broker refused the login" in result.stderr
    assert ("Not authorized" in result.stderr) or ("Bad user name or password" in result.stderr)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--port", "70000"], "--port"),
        (["--window", "0"], "--window"),
        (["--ca-file", "/etc/hostname"], "--ca-file"),  # without --tls
        (["--tls", "--ca-file", "/nonexistent.pem"], "--ca-file"),
        (["--tls", "--cert-file", "/etc/hostname"], "--cert-file"),  # without its key
        (["--password-file", "/nonexistent"], "--password-file"),
    ],
)
def test_bad_options_stop_the_command_naming_the_option(args, option):
    with pytest.raises(CommandError) as info:
        call_command("bms_mqtt", *args)
    assert str(info.value).startswith(option)


def test_password_file_is_bounded_at_the_mqtt_field_size(tmp_path):
    at_limit = tmp_path / "ok"
    at_limit.write_bytes(b"p" * MQTT_FIELD_MAX_BYTES + b"\n")
    assert len(read_secret_file(str(at_limit))) == MQTT_FIELD_MAX_BYTES
    over = tmp_path / "big"
    over.write_bytes(b"p" * (MQTT_FIELD_MAX_BYTES + 1))
    with pytest.raises(MqttConfigError) as info:
        read_secret_file(str(over))
    assert info.value.option == "--password-file"
    with pytest.raises(MqttConfigError) as info:
        MqttAuth(username="u" * (MQTT_FIELD_MAX_BYTES + 1)).check()
    assert info.value.option == "--username"
    with pytest.raises(MqttConfigError):
        MqttAuth(password="p").check()  # a password without a user name


def test_settings_give_the_commands_defaults(settings, tmp_path):
    """BMS_MQTT_* are the options' defaults; the parser reads them when the command loads."""
    from sensors.management.commands.bms_mqtt import Command

    settings.BMS_MQTT_USERNAME = "from-settings"
    settings.BMS_MQTT_TLS = True
    parser = Command().create_parser("manage.py", "bms_mqtt")
    opts = parser.parse_args([])
    assert opts.username == "from-settings" and opts.tls is True
    assert parser.parse_args(["--no-tls"]).tls is False
