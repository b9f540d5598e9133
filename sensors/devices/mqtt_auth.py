"""How `bms_mqtt` logs in to the broker: username/password and TLS (paho-mqtt's documented
`username_pw_set` and `tls_set`). Anyone who can publish to `emon/#` feeds readings into the
site, so a broker off the loopback should demand a login, over TLS (docs/SECURITY.md).

Every value is checked before the client starts, and a bad one raises MqttConfigError naming
the option, so the command stops with a message instead of retrying a login that cannot work.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt

# MQTT 3.1.1 / 5: user names and passwords are at most 65535 bytes (a two-byte length).
MQTT_FIELD_MAX_BYTES = 65_535
# CONNACK reasons that no retry will cure: the command stops and says so.
LOGIN_REFUSED = {
    134,  # Bad user name or password (3.1.1 return code 4)
    135,  # Not authorized (3.1.1 return code 5)
    140,  # Bad authentication method
}


class MqttConfigError(ValueError):
    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class MqttAuth:
    username: str = ""
    password: str = ""
    tls: bool = False
    ca_file: str = ""  # empty: the system's CA store
    cert_file: str = ""  # client certificate, when the broker asks for one
    key_file: str = ""

    def check(self) -> None:
        """Raise MqttConfigError for a value the broker or the TLS library would refuse later."""
        if len(self.username.encode()) > MQTT_FIELD_MAX_BYTES:
            raise MqttConfigError("--username", f"longer than {MQTT_FIELD_MAX_BYTES} bytes")
        if len(self.password.encode()) > MQTT_FIELD_MAX_BYTES:
            raise MqttConfigError("--password-file", f"longer than {MQTT_FIELD_MAX_BYTES} bytes")
        if self.password and not self.username:
            raise MqttConfigError("--username", "a password needs a user name")
        for option, path in (
            ("--ca-file", self.ca_file),
            ("--cert-file", self.cert_file),
            ("--key-file", self.key_file),
        ):
            if path and not self.tls:
                raise MqttConfigError(option, "needs --tls")
            if path and not Path(path).is_file():
                raise MqttConfigError(option, f"{path} is not a readable file")
        if bool(self.cert_file) != bool(self.key_file):
            raise MqttConfigError("--cert-file", "a client certificate needs --key-file, and back")


def read_secret_file(path: str, option: str = "--password-file") -> str:
    """The secret in `path` without its trailing newline; bounded at MQTT's field size."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MQTT_FIELD_MAX_BYTES + 2)  # room for one "\r\n"
    except OSError as exc:
        raise MqttConfigError(option, f"{path} cannot be read: {exc.strerror}") from None
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    if len(raw) > MQTT_FIELD_MAX_BYTES:
        raise MqttConfigError(option, f"longer than {MQTT_FIELD_MAX_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MqttConfigError(option, "is not UTF-8") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def apply_auth(client: mqtt.Client, auth: MqttAuth) -> None:
    """Set the login and TLS on a paho client before it connects."""
    auth.check()
    if auth.username:
        client.username_pw_set(auth.username, auth.password or None)
    if auth.tls:
        # Certificate and host name are always verified: there is no option to turn that off.
        client.tls_set(
            ca_certs=auth.ca_file or None,
            certfile=auth.cert_file or None,
            keyfile=auth.key_file or None,
            cert_reqs=ssl.CERT_REQUIRED,
            tls_version=ssl.PROTOCOL_TLS_CLIENT,
        )
