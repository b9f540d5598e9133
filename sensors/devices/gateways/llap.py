"""Ciseco LLAP messages: exactly 12 characters, `a` + 2-character device id + 9-character
message padded with `-`, e.g. `aXXTMPA22.5-` (device XX, temperature 22.5).

Over a serial port the messages may arrive back to back with no line breaks, so
`split_messages` scans a chunk of text for them and reports what it had to skip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MESSAGE_LENGTH = 12
_DEVICE_ID = re.compile(r"^[A-Z0-9\-#@?\\*]{2}$")
# A reading: upper-case command letters then a number, e.g. TMPA22.5, BATT3.05, RHUM-1.
_READING = re.compile(r"^([A-Z]+?)(-?\d+(?:\.\d+)?)$")


class LlapParseError(ValueError):
    pass


@dataclass(frozen=True)
class LlapMessage:
    device_id: str
    command: str
    value: float | None  # None for status messages (STARTED, AWAKE, SLEEPING, ...)


def parse_message(message: str) -> LlapMessage:
    if len(message) != MESSAGE_LENGTH or message[0] != "a":
        raise LlapParseError(f"not a 12-character LLAP message: {message!r}")
    device_id, body = message[1:3], message[3:]
    if not _DEVICE_ID.match(device_id):
        raise LlapParseError(f"bad LLAP device id {device_id!r} in {message!r}")
    body = body.rstrip("-")
    if not body:
        raise LlapParseError(f"empty LLAP message {message!r}")
    reading = _READING.match(body)
    if reading:
        return LlapMessage(device_id, reading.group(1), float(reading.group(2)))
    if body.isalpha() and body.isupper():
        return LlapMessage(device_id, body, None)
    raise LlapParseError(f"unrecognised LLAP message body {body!r} in {message!r}")


def split_messages(text: str) -> tuple[list[str], str, int]:
    """Split serial text into 12-character candidates starting with `a`.

    Returns (messages, remainder to prepend to the next chunk, characters skipped).
    """
    messages: list[str] = []
    skipped = 0
    i = 0
    text = text.replace("\r", "").replace("\n", "")
    while i < len(text):
        if text[i] != "a":
            skipped += 1
            i += 1
            continue
        if len(text) - i < MESSAGE_LENGTH:
            break
        messages.append(text[i : i + MESSAGE_LENGTH])
        i += MESSAGE_LENGTH
    return messages, text[i:], skipped
