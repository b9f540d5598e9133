"""Property tests of the serial gateway parsers (sensors/gateways): JeeLib and LLAP.

Documented behaviour: a line is a packet, None (not a packet) or JeeLibParseError; an LLAP
message is parsed or LlapParseError. Nothing else may escape, whatever the radio delivers.
"""

from __future__ import annotations

import struct

from hypothesis import assume, given
from hypothesis import strategies as st

from sensors.devices.gateways import jeelib, llap
from tests.fuzz.profiles import FUZZ

# Serial noise: printable text, control characters, brackets, minus signs, digits.
noise = st.text(alphabet=st.characters(codec="utf-8"), max_size=120)
byte_lists = st.lists(st.integers(0, 255), max_size=40)
datacodes = st.text(alphabet="hHiIlLfbBxq?", min_size=1, max_size=8)


@FUZZ
@given(noise)
def test_jeelib_any_text_is_packet_none_or_parse_error(line):
    try:
        packet = jeelib.parse_line(line)
    except jeelib.JeeLibParseError:
        assert line.strip().startswith("OK")
        return
    if packet is not None:
        assert 0 <= packet.node_id <= jeelib.NODE_ID_MASK


@FUZZ
@given(
    st.lists(st.one_of(st.integers(-1000, 1000), st.sampled_from(["x", "-", "(", ")", "(-5)"]))),
    st.booleans(),
)
def test_jeelib_ok_lines_with_bad_tokens(tokens, with_rssi):
    line = "OK " + " ".join(str(t) for t in tokens) + (" (-70)" if with_rssi else "")
    try:
        packet = jeelib.parse_line(line)
    except jeelib.JeeLibParseError:
        return
    assert packet is not None
    assert all(0 <= int(t) <= 255 for t in tokens if str(t).lstrip("-").isdigit())


@FUZZ
@given(st.integers(0, 255), byte_lists, st.one_of(st.none(), st.integers(-120, 0)))
def test_jeelib_well_formed_lines_round_trip(header, data, rssi):
    line = "OK " + " ".join(str(b) for b in [header, *data])
    if rssi is not None:
        line += f" ({rssi})"
    packet = jeelib.parse_line(line)
    assert packet == jeelib.JeePacket(header & 0x1F, bytes(data), rssi)


@FUZZ
@given(st.binary(max_size=40), datacodes)
def test_jeelib_decode_any_bytes_any_codes(data, codes):
    try:
        values = jeelib.decode_values(data, codes)
    except jeelib.JeeLibParseError:
        return
    assert all(isinstance(v, float) for v in values)


@FUZZ
@given(st.lists(st.integers(-32768, 32767), max_size=20))
def test_jeelib_int16_values_round_trip(values):
    data = struct.pack(f"<{len(values)}h", *values)
    assert jeelib.decode_values(data, "h") == [float(v) for v in values]


@FUZZ
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=10),
    st.lists(st.text(min_size=1, max_size=8), max_size=10),
    st.lists(st.floats(-1000, 1000), max_size=10),
)
def test_jeelib_name_values_never_raises(values, names, scales):
    named = jeelib.name_values(values, names, scales)
    assert len(named) <= len(values)


@FUZZ
@given(noise)
def test_llap_any_text_is_message_or_parse_error(text):
    try:
        message = llap.parse_message(text)
    except llap.LlapParseError:
        return
    assert len(text) == llap.MESSAGE_LENGTH and text[0] == "a"
    assert message.device_id == text[1:3]


@FUZZ
@given(
    st.text(alphabet="ABCXYZ019-#@?*", min_size=2, max_size=2),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-", max_size=9),
)
def test_llap_well_framed_messages(device, body):
    message = "a" + device + body.ljust(9, "-")
    try:
        parsed = llap.parse_message(message)
    except llap.LlapParseError:
        return
    assert parsed.device_id == device
    if parsed.value is not None:
        assert parsed.command.isalpha()


@FUZZ
@given(noise)
def test_llap_split_accounts_for_every_character(text):
    messages, remainder, skipped = llap.split_messages(text)
    flat = text.replace("\r", "").replace("\n", "")
    assert all(len(m) == llap.MESSAGE_LENGTH and m[0] == "a" for m in messages)
    assert len(messages) * llap.MESSAGE_LENGTH + len(remainder) + skipped == len(flat)
    assert remainder == "" or (remainder[0] == "a" and len(remainder) < llap.MESSAGE_LENGTH)


@FUZZ
@given(st.lists(st.text(alphabet="ABCDEF0123456789.-", min_size=9, max_size=9), max_size=6))
def test_llap_split_finds_back_to_back_messages(bodies):
    assume(all("a" not in b for b in bodies))
    stream = "".join("aXX" + b for b in bodies)
    messages, remainder, skipped = llap.split_messages(stream)
    assert messages == ["aXX" + b for b in bodies]
    assert remainder == "" and skipped == 0
