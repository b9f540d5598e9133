"""Property tests of the ingest formats (sensors/ingest/parse.py): REST readings, emoncms
/input/post (fulljson, json, csv) and /input/bulk.

Documented behaviour: rows or IngestError with a 4xx status and a field name. Any other
exception would be a 500 at the endpoint.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sensors.ingest.emoncms_input import parse_loose_pairs, parse_post
from sensors.ingest.parse import (
    MIN_TIME,
    IngestError,
    Limits,
    decompress_body,
    parse_bulk,
    parse_readings,
)
from tests.fuzz.profiles import FUZZ

NOW = 1_750_000_000.0
LIMITS = Limits(max_rows=50, max_values=200, max_future_s=900, max_decompressed_bytes=4096)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
keys = st.one_of(st.from_regex(r"[A-Za-z0-9_.\-]{1,70}", fullmatch=True), st.text(max_size=10))
times = st.one_of(
    st.integers(MIN_TIME - 10, int(NOW) + 2000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.none(),
)
readings = st.fixed_dictionaries(
    {"values": st.dictionaries(keys, json_scalars, max_size=6)},
    optional={"node": json_scalars, "time": times},
)


def _check_rows(rows) -> None:
    assert rows, "a successful parse returns at least one row"
    for row in rows:
        assert MIN_TIME <= row.t <= NOW + LIMITS.max_future_s
        assert row.values
        assert all(math.isfinite(v) for v in row.values.values())


def _check_error(exc: IngestError) -> None:
    assert 400 <= exc.status < 500
    assert exc.message
    assert "error" in exc.body()


@FUZZ
@given(st.binary(max_size=300))
def test_readings_any_bytes(body):
    try:
        _check_rows(parse_readings(body, NOW, LIMITS))
    except IngestError as exc:
        _check_error(exc)


@FUZZ
@given(st.one_of(readings, st.lists(readings, max_size=8), json_values))
def test_readings_any_json_document(doc):
    body = json.dumps(doc).encode()
    try:
        rows = parse_readings(body, NOW, LIMITS)
    except IngestError as exc:
        _check_error(exc)
        return
    _check_rows(rows)


post_params = st.dictionaries(
    st.sampled_from(["node", "fulljson", "json", "csv", "data", "time", "apikey", "other"]),
    st.one_of(st.text(max_size=60), json_values.map(json.dumps)),
    max_size=5,
)


@FUZZ
@given(post_params)
def test_input_post_any_params(params):
    try:
        batch, _fulljson = parse_post(params, NOW, LIMITS)
    except IngestError as exc:
        _check_error(exc)
        return
    assert len(batch.rows) <= 1
    if batch.rows:
        _check_rows(batch.rows)
    else:
        assert batch.skipped  # nothing queued: every value was skipped, and said so


@FUZZ
@given(st.text(max_size=200))
def test_loose_pairs_any_text(text):
    try:
        values = parse_loose_pairs(text, "json")
    except IngestError as exc:
        _check_error(exc)
        return
    assert all(math.isfinite(v) for v in values.values())


bulk_rows = st.lists(
    st.one_of(
        st.lists(json_scalars, max_size=6),
        st.tuples(
            st.integers(-100, 100),
            st.one_of(st.integers(0, 40), st.text(max_size=8)),
            st.dictionaries(keys, json_scalars, max_size=3),
        ).map(list),
        json_values,
    ),
    max_size=8,
)


@FUZZ
@given(
    st.one_of(bulk_rows.map(json.dumps), st.text(max_size=80)),
    st.dictionaries(
        st.sampled_from(["sentat", "offset", "time"]),
        st.one_of(st.integers(0, 2 * int(NOW)).map(str), st.text(max_size=12)),
        max_size=2,
    ),
)
def test_input_bulk_any_data(data, reference):
    try:
        rows = parse_bulk({"data": data, **reference}, NOW, LIMITS)
    except IngestError as exc:
        _check_error(exc)
        return
    if rows:
        _check_rows(rows)


@FUZZ
@given(st.binary(max_size=300))
def test_compressed_body_any_bytes(body):
    try:
        raw = decompress_body(body, LIMITS)
    except IngestError as exc:
        _check_error(exc)
        return
    assert len(raw) <= LIMITS.max_decompressed_bytes


def test_zip_bomb_is_refused_with_413():
    import zlib

    bomb = zlib.compress(b"0" * (LIMITS.max_decompressed_bytes * 50))
    with pytest.raises(IngestError) as caught:
        decompress_body(bomb, LIMITS)
    assert caught.value.status == 413


# --- Found by the properties above: integers too big for a float -------------------------------
# JSON allows integers of any length; Python parses them exactly and float() of one with more
# than ~309 digits raised OverflowError, a 500 instead of a 400 (fixed: sensors.ingest.parse.finite_float).
HUGE = "1" + "0" * 400


@pytest.mark.parametrize(
    "call",
    [
        lambda: parse_readings(b'{"values": {"a": %s}}' % HUGE.encode(), NOW, LIMITS),
        lambda: parse_readings(b'{"time": %s, "values": {"a": 1}}' % HUGE.encode(), NOW, LIMITS),
        lambda: parse_bulk({"data": f"[[{HUGE}, 1, 2]]"}, NOW, LIMITS),
        lambda: parse_bulk({"data": f'[[0, 1, {{"a": {HUGE}}}]]'}, NOW, LIMITS),
    ],
    ids=["readings-value", "readings-time", "bulk-time", "bulk-value"],
)
def test_huge_json_integer_is_a_400(call):
    with pytest.raises(IngestError) as caught:
        call()
    _check_error(caught.value)


@pytest.mark.parametrize("name", ["¹", "²3", "٣", "１"])
def test_a_unicode_digit_node_name_is_a_name_not_a_crash(name):
    """Found by test_input_post_any_params in CI (session 6): str.isdigit() is true for "¹",
    int() refuses it, and /input/post answered 500. Only ASCII digits are a node number."""
    from sensors.ingest.emoncms_input import node_ref
    from sensors.ingest.parse import check_node_ref

    assert check_node_ref(name, "node") == name
    ref, problem = node_ref(name)
    assert problem == "" and not isinstance(ref, int)
    assert check_node_ref("12", "node") == 12 and node_ref("12") == (12, "")
