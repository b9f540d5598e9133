"""JeeLib and LLAP serial parsers."""

from __future__ import annotations

import pytest

from sensors.devices.gateways import jeelib, llap

# --- JeeLib -----------------------------------------------------------------------------------


def test_jeelib_line_with_rssi():
    packet = jeelib.parse_line("OK 10 0 1 2 3 (-0)")
    assert packet == jeelib.JeePacket(10, bytes([0, 1, 2, 3]), 0)
    assert jeelib.decode_values(packet.data) == [256.0, 770.0]


def test_jeelib_negative_int16_and_rssi():
    packet = jeelib.parse_line("OK 5 24 252 100 0 (-65)\r\n")
    assert packet.rssi == -65
    assert jeelib.decode_values(packet.data) == [-1000.0, 100.0]


def test_jeelib_header_flags_are_masked_off_the_node_id():
    # RF12demo sets 0x20/0x40/0x80 (ACK/DST/CTL) in the header byte.
    assert jeelib.parse_line("OK 42 1 0").node_id == 10


def test_jeelib_non_packet_lines_are_skipped():
    for line in ("", "  ", "[RF12demo.12] W i1 g210 @ 433 MHz", "> 0s", " ? 1 2 3"):
        assert jeelib.parse_line(line) is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("OK", "no node id"),
        ("OK 10 x 2", "non-numeric"),
        ("OK 10 256 1", "out of range"),
    ],
)
def test_jeelib_bad_packets_raise(line, message):
    with pytest.raises(jeelib.JeeLibParseError, match=message):
        jeelib.parse_line(line)


def test_jeelib_odd_byte_count_is_an_error_for_int16():
    with pytest.raises(jeelib.JeeLibParseError, match="whole number"):
        jeelib.decode_values(bytes([1, 2, 3]))


def test_jeelib_mixed_datacodes():
    data = bytes([0xE8, 0x03, 0x10, 0x27, 0, 0])  # int16 1000, uint32 10000
    assert jeelib.decode_values(data, "hI") == [1000.0, 10000.0]
    with pytest.raises(jeelib.JeeLibParseError, match="expected 4 data bytes"):
        jeelib.decode_values(data, "hh")


def test_jeelib_names_and_scales():
    named = jeelib.name_values([120.0, 2345.0, 7.0], ["power1", "temp"], [1, 0.01])
    assert named == {"power1": 120.0, "temp": 23.45, "3": 7.0}


# --- LLAP ---------------------------------------------------------------------------------------


def test_llap_temperature_reading():
    assert llap.parse_message("aXXTMPA22.5-") == llap.LlapMessage("XX", "TMPA", 22.5)


def test_llap_negative_and_integer_values():
    assert llap.parse_message("aAARHUM45---").value == 45.0
    assert llap.parse_message("aB1TMPA-5.25") == llap.LlapMessage("B1", "TMPA", -5.25)


def test_llap_status_messages_have_no_value():
    assert llap.parse_message("aXXSTARTED--") == llap.LlapMessage("XX", "STARTED", None)


@pytest.mark.parametrize(
    "message", ["aXXTMPA22.5", "bXXTMPA22.5-", "aX TMPA22.5-", "aXX---------", "aXXtmpa22.5-"]
)
def test_llap_bad_messages_raise(message):
    with pytest.raises(llap.LlapParseError):
        llap.parse_message(message)


def test_llap_stream_split_handles_back_to_back_messages_and_noise():
    messages, rest, skipped = llap.split_messages("xxaXXTMPA22.5-aXXBATT3.05-\naYY")
    assert messages == ["aXXTMPA22.5-", "aXXBATT3.05-"]
    assert rest == "aYY"
    assert skipped == 2
