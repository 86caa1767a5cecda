"""The native decoder (``native/``, Rust) against the Python value rules it mirrors.

Every value rule: random row-image bytes through ``values.py`` (the reference, itself tested
rule by rule in test_capture_values.py) and through ``sluice_binlog.decode_value`` give the
same text and the same next position, or both refuse. Whole rows events (NULLs, partial
column bitmaps, UPDATE before/after and ``old``) through a ``Stream`` give the same ``data`` and
``old`` as ``TableCodec.decode_rows`` + ``dml.rows_records``.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysqlreplication.constants import FIELD_TYPE as T

from pipeline.capture import native
from pipeline.capture.columns import ColumnSpec
from pipeline.capture.decoder import PyStream
from pipeline.capture.dml import rows_records
from pipeline.capture.events import EVENT_CLASSES, RawRowsEv, RowsEv, TableMapEv, XidEv
from pipeline.capture.rowcodec import TableCodec
from sluice_common.errors import SourceError
from tests.support.prereq import missing

mod = native.load()
if mod is None:
    missing("the native capture extension is not built (scripts/bootstrap)", module=True)

MEMBERS = ("a", "b,c", 'q"uote', "é", "", "tab\there", "x" * 10, "z")
SPECS = [
    ColumnSpec("i8", T.TINY), ColumnSpec("u8", T.TINY, unsigned=True), ColumnSpec("i16", T.SHORT),
    ColumnSpec("u16", T.SHORT, unsigned=True), ColumnSpec("i24", T.INT24), ColumnSpec("u24", T.INT24, unsigned=True),
    ColumnSpec("i32", T.LONG), ColumnSpec("u32", T.LONG, unsigned=True), ColumnSpec("i64", T.LONGLONG),
    ColumnSpec("u64", T.LONGLONG, unsigned=True), ColumnSpec("fl", T.FLOAT), ColumnSpec("db", T.DOUBLE),
    ColumnSpec("d652", T.NEWDECIMAL, precision=65, scale=30), ColumnSpec("d52", T.NEWDECIMAL, precision=5, scale=2),
    ColumnSpec("d100", T.NEWDECIMAL, precision=10, scale=0), ColumnSpec("d1814", T.NEWDECIMAL, precision=18, scale=14),
    ColumnSpec("dt", T.DATE), ColumnSpec("yr", T.YEAR), ColumnSpec("otm", T.TIME), ColumnSpec("odt", T.DATETIME),
    ColumnSpec("ots", T.TIMESTAMP),
    *[ColumnSpec(f"dt2_{f}", T.DATETIME2, fsp=f) for f in range(7)],
    *[ColumnSpec(f"ts2_{f}", T.TIMESTAMP2, fsp=f) for f in range(7)],
    *[ColumnSpec(f"tm2_{f}", T.TIME2, fsp=f) for f in range(7)],
    ColumnSpec("vc", T.VARCHAR, charset="utf8mb4", encoding="utf8", max_length=1020),
    ColumnSpec("vc1", T.VARCHAR, charset="utf8mb4", encoding="utf8", max_length=40),
    ColumnSpec("ch", T.STRING, charset="utf8mb4", encoding="utf8", max_length=40),
    ColumnSpec("l1", T.VARCHAR, charset="latin1", encoding="sluice_mysql_latin1", max_length=20),
    ColumnSpec("l1i", T.VARCHAR, charset="latin1", encoding="latin-1", max_length=20),
    ColumnSpec("tt1", T.BLOB, charset="utf8mb4", encoding="utf8", length_size=1),
    ColumnSpec("lt1", T.BLOB, charset="latin1", encoding="sluice_mysql_latin1", length_size=2),
    ColumnSpec("lb4", T.BLOB, charset="binary", length_size=4),
    ColumnSpec("bn", T.STRING, charset="binary", max_length=6),
    ColumnSpec("vb", T.VARCHAR, charset="binary", max_length=300),
    ColumnSpec("tx", T.BLOB, charset="utf8mb4", encoding="utf8", length_size=2),
    ColumnSpec("bl", T.BLOB, charset="binary", length_size=3),
    ColumnSpec("en1", T.ENUM, size=1, members=MEMBERS), ColumnSpec("en2", T.ENUM, size=2, members=MEMBERS),
    ColumnSpec("st1", T.SET, size=1, members=MEMBERS), ColumnSpec("st8", T.SET, size=8, members=MEMBERS),
    ColumnSpec("b3", T.BIT, bits=3), ColumnSpec("b64", T.BIT, bits=64), ColumnSpec("geo", T.GEOMETRY, length_size=4),
]


def python_value(spec: ColumnSpec, raw: bytes) -> tuple[str, int] | str:
    try:
        return spec.decoder()(raw, 0)
    except (struct.error, IndexError, ValueError, OverflowError) as e:
        return f"error {type(e).__name__}"


def native_value(spec: ColumnSpec, raw: bytes) -> tuple[str, int] | str:
    try:
        text, end = mod.decode_value(native.op_for(spec), raw)
    except ValueError as e:
        return f"error {type(e).__name__}"
    return json.loads(text), end


def image(spec: ColumnSpec, data: st.DataObject) -> bytes:
    """A value's bytes: random, with a length prefix that fits for strings most of the time."""
    prefix = {T.VARCHAR: 2 if spec.max_length > 255 else 1, T.STRING: 1, T.BLOB: spec.length_size,
              T.GEOMETRY: spec.length_size}.get(spec.type)
    if prefix:
        body = data.draw(st.binary(max_size=40) | st.text(max_size=20).map(lambda s: s.encode()))
        return len(body).to_bytes(prefix, "little") + body
    return data.draw(st.binary(min_size=0, max_size=40))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_rule_matches_the_python_decoder(spec, data):
    raw = image(spec, data)
    want = python_value(spec, raw)
    got = native_value(spec, raw)
    if isinstance(want, str):  # Python refused: a short image is an error natively too
        assert isinstance(got, str), (raw.hex(), got)
    elif isinstance(got, str):  # the native side refuses images that end inside the value
        assert want[1] > len(raw), (raw.hex(), want)
    else:
        assert got == want, raw.hex()


@settings(max_examples=2000, deadline=None)
@given(bits=st.integers(0, 2**64 - 1))
def test_double_text_is_pythons_repr(bits):
    raw = bits.to_bytes(8, "little")
    assert native_value(ColumnSpec("d", T.DOUBLE), raw) == python_value(ColumnSpec("d", T.DOUBLE), raw)


@settings(max_examples=2000, deadline=None)
@given(bits=st.integers(0, 2**32 - 1))
def test_float_text_is_the_shortest_float32_round_trip(bits):
    raw = bits.to_bytes(4, "little")
    assert native_value(ColumnSpec("f", T.FLOAT), raw) == python_value(ColumnSpec("f", T.FLOAT), raw)


def test_every_type_capture_decodes_is_held_equal_here():
    """Every column type with a rule in values.py (all of MySQL's FIELD_TYPE codes that
    ``ColumnSpec.decoder`` takes) has a case in SPECS, except binary JSON, which only Python
    decodes (its table stays in Python: the next test); and every native op is run."""
    decoded = set()
    for code in {v for k, v in vars(T).items() if k.isupper() and isinstance(v, int)}:
        try:
            ColumnSpec("c", code, size=1, length_size=2, bits=1).decoder()
        except SourceError:
            continue
        decoded.add(code)
    assert decoded - {s.type for s in SPECS} == {T.JSON}
    assert {native.op_for(s)[0] for s in SPECS} == set(range(19))


def test_mysql_binary_json_and_unknown_charsets_stay_in_python():
    assert native.op_for(ColumnSpec("js", T.JSON, length_size=4)) is None
    assert native.op_for(ColumnSpec("g", T.VARCHAR, charset="gbk", encoding="gbk", max_length=40)) is None
    codec = TableCodec.build("db", "t", [ColumnSpec("id", T.LONG), ColumnSpec("js", T.JSON, length_size=4)], [0])
    assert native.plan_for(codec) is None


# ---- whole rows events through a Stream ------------------------------------------------------

ROW_SPECS = [ColumnSpec("id", T.LONG, is_pk=True), ColumnSpec("v", T.VARCHAR, charset="utf8mb4", encoding="utf8",
                                                               max_length=400),
             ColumnSpec("n", T.NEWDECIMAL, precision=10, scale=2), ColumnSpec("t", T.DATETIME2, fsp=3),
             ColumnSpec("b", T.BLOB, charset="binary", length_size=2)]
CODEC = TableCodec.build("db", "t", ROW_SPECS, [0])


def _packet(etype: int, body: bytes, next_pos: int = 1000) -> bytes:
    ev = struct.pack("<IBIII H", 1700000000, etype, 1, 19 + len(body) + 4, next_pos, 0)[:19] + body + b"\0" * 4
    payload = b"\x00" + ev
    return struct.pack("<I", len(payload))[:3] + b"\x01" + payload


def _row_image(values: list, cols: list[int]) -> bytes:
    nulls = sum(1 << j for j, c in enumerate(cols) if values[c] is None)
    out = bytearray(nulls.to_bytes((len(cols) + 7) // 8, "little"))
    for c in cols:
        v = values[c]
        if v is None:
            continue
        if c == 0:
            out += struct.pack("<i", v)
        elif c == 1:
            out += len(v).to_bytes(2, "little") + v
        elif c == 2:
            out += v.to_bytes(5, "big")
        elif c == 3:
            out += v.to_bytes(7, "big")
        else:
            out += len(v).to_bytes(2, "little") + v
    return bytes(out)


row_values = st.tuples(
    st.integers(-2**31, 2**31 - 1), st.none() | st.binary(max_size=30) | st.text(max_size=10).map(str.encode),
    st.none() | st.integers(0, 2**40 - 1), st.none() | st.integers(0x8000000000 << 16, (0x8000000000 << 16) + 2**50),
    st.none() | st.binary(max_size=12)).map(list)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from([23, 24, 25]), rows=st.lists(st.tuples(row_values, row_values), min_size=1, max_size=4),
       present=st.lists(st.booleans(), min_size=5, max_size=5), present2=st.lists(st.booleans(), min_size=5,
                                                                                    max_size=5))
def test_rows_events_match_the_python_codec(kind, rows, present, present2):
    cols = [c for c in range(5) if present[c] or c == 0]
    cols2 = [c for c in range(5) if present2[c] or c == 0]
    bitmap = sum(1 << c for c in cols).to_bytes(1, "little")
    bitmap2 = sum(1 << c for c in cols2).to_bytes(1, "little")
    images = b""
    for before, after in rows:
        images += _row_image(before, cols)
        if kind == 24:
            images += _row_image(after, cols2)
    body = (7).to_bytes(6, "little") + b"\0\0" + b"\x05" + bitmap + (bitmap2 if kind == 24 else b"") + images
    kind_name = {23: "INSERT", 24: "UPDATE", 25: "DELETE"}[kind]
    py_rows = CODEC.decode_rows(images, 0, len(images), bitmap, bitmap2 if kind == 24 else None)
    want = rows_records(kind_name, CODEC, py_rows, "", 0, 0, None, "", 0, 0)
    for stream in (mod.Stream(True, EVENT_CLASSES), PyStream(True)):  # both decoders, the same events
        stream.feed(_packet(19, (7).to_bytes(6, "little") + b"layout") + _packet(kind, body))
        (table_map,) = stream.items(10)
        assert type(table_map) is TableMapEv and table_map.table_id == 7 and stream.waiting_for() == 7
        ops, keys = native.plan_for(CODEC)
        stream.set_table(7, 1, "db.t", ops, keys)
        (item,) = stream.items(10)
        assert item.present == bitmap and item.present2 == (bitmap2 if kind == 24 else None)
        if type(item) is RowsEv:
            assert item.nrows == len(rows)
            assert json.loads(item.data) == want["data"]
            assert (json.loads(item.old) if item.old is not None else None) == want["old"]
        else:
            assert type(item) is RawRowsEv and item.rows == images and not item.partial_json
        # the same table map bytes again: nothing to decide, no item
        stream.feed(_packet(19, (7).to_bytes(6, "little") + b"layout"))
        assert stream.items(10) == [] and stream.waiting_for() is None


def _split_packets(payload: bytes) -> bytes:
    """MySQL framing of one payload: 16 MB - 1 pieces, then a shorter (maybe empty) last one."""
    out, seq, max_len = b"", 1, 0xFFFFFF
    while True:
        piece, payload = payload[:max_len], payload[max_len:]
        out += len(piece).to_bytes(3, "little") + bytes([seq & 0xFF]) + piece
        seq += 1
        if len(piece) < max_len:
            return out


def test_an_event_over_16_mb_fed_in_odd_pieces():
    """A rows event larger than one protocol packet (a 17 MB BLOB) arrives as continuation
    packets; bytes fed in pieces that cut headers and payloads anywhere still frame right."""
    blob = bytes(range(256)) * (17 * 4096)
    codec = TableCodec.build("db", "t", [ColumnSpec("id", T.LONG, is_pk=True),
                                         ColumnSpec("b", T.BLOB, charset="binary", length_size=4)], [0])
    image = b"\x00" + struct.pack("<i", 9) + len(blob).to_bytes(4, "little") + blob
    body = (3).to_bytes(6, "little") + b"\0\0" + b"\x02" + b"\x03" + image
    event = struct.pack("<IBIII", 1700000000, 23, 1, 19 + len(body) + 4, 99)[:17] + b"\0\0" + body + b"\0" * 4
    raw = (_packet(19, (3).to_bytes(6, "little") + b"two columns") + _split_packets(b"\x00" + event)
           + _packet(16, b"\0" * 8, 2000))
    stream = mod.Stream(True, EVENT_CLASSES)
    items, at, step = [], 0, 1
    while at < len(raw):
        stream.feed(raw[at:at + step])
        at += step
        step = step * 7 % 5_000_011 + 1
        while True:
            got = stream.items(100)
            if not got:
                break
            items += got
            if type(got[-1]) is TableMapEv:
                ops, keys = native.plan_for(codec)
                stream.set_table(3, 1, "db.t", ops, keys)
    assert [type(i) for i in items] == [TableMapEv, RowsEv, XidEv]
    rows = json.loads(items[1].data)
    assert rows == [{"id": "9", "b": blob.decode("latin-1")}] and items[2].next == 2000
