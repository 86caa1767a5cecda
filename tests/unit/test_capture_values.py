"""One test (at least) per value rule of pipeline/capture/values.py, on hand-built row-image bytes."""

from __future__ import annotations

import struct
from decimal import Context, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.capture import values as V

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def dec(decoder, raw: bytes, prefix: bytes = b"\xaa") -> str:
    """Decode ``raw`` placed after a prefix (decoders must honour ``pos``) and check the end offset."""
    text, end = decoder(prefix + raw + b"\xbb", len(prefix))
    assert end == len(prefix) + len(raw)
    return text


def mysql_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL encoding (test-side encoder)."""
    neg = value < 0
    digits = f"{value.copy_abs():.{scale}f}"
    ipart, _, fpart = digits.partition(".")
    intg = precision - scale
    ipart = ipart.rjust(intg, "0")[-intg:] if intg else ""
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ipart[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ipart[i:i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(fpart[i:i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fpart[scale - scale % 9:]).to_bytes(DIG2BYTES[scale % 9], "big")
    out[0] ^= 0x80
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


@pytest.mark.parametrize("size,unsigned,value", [
    (1, False, -128), (1, True, 255), (2, False, -32768), (2, True, 65535), (3, False, -8388608),
    (3, True, 16777215), (4, False, -2147483648), (4, True, 4294967295), (8, False, -2**63), (8, True, 2**64 - 1),
])
def test_integers_are_decimal_text(size, unsigned, value):
    raw = value.to_bytes(size, "little", signed=not unsigned)
    assert dec(V.int_decoder(size, unsigned), raw) == str(value)


def test_tinyint1_keeps_values_above_one():
    assert dec(V.int_decoder(1, True), b"\xff") == "255"
    assert dec(V.int_decoder(1, False), b"\x05") == "5"


@pytest.mark.parametrize("nbytes,raw,want", [(1, b"\x01", "1"), (2, b"\x03\xff", "1023"),
                                             (8, b"\xff" * 8, "18446744073709551615"), (1, b"\x00", "0")])
def test_bit_is_unsigned_decimal(nbytes, raw, want):
    assert dec(V.bit_decoder(nbytes), raw) == want


def test_decimal_known_vectors_from_mysql_docs():
    d = V.decimal_decoder(14, 4)
    assert dec(d, bytes.fromhex("810DFB38D204D2")) == "1234567890.1234"
    assert dec(d, bytes.fromhex("7EF204C72DFB2D")) == "-1234567890.1234"


@pytest.mark.parametrize("text,p,s", [
    ("-99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
    ("0.000000000000000000000000000001", 65, 30), ("0.000000000000000000000000000000", 65, 30),
    ("-999.99", 5, 2), ("0.01", 5, 2), ("1234567890", 10, 0), ("-1", 10, 0), ("0", 10, 0), ("1.500", 10, 3),
])
def test_decimal_exact_with_scale_digits(text, p, s):
    assert dec(V.decimal_decoder(p, s), mysql_decimal(Decimal(text), p, s)) == text


@given(st.integers(min_value=1, max_value=65).flatmap(
    lambda p: st.tuples(st.just(p), st.integers(min_value=0, max_value=min(p, 30)))).flatmap(
    lambda ps: st.tuples(st.just(ps), st.integers(min_value=-(10 ** ps[0] - 1), max_value=10 ** ps[0] - 1))))
def test_decimal_roundtrip_property(args):
    (p, s), unscaled = args
    value = Decimal(unscaled).scaleb(-s, Context(prec=100))
    want = f"{value:.{s}f}"
    if Decimal(want) == 0:
        want = want.lstrip("-")
    assert dec(V.decimal_decoder(p, s), mysql_decimal(value, p, s)) == want
    assert len(mysql_decimal(value, p, s)) == V.decimal_size(p, s)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float_shortest_text_roundtrips_float32(x):
    raw = struct.pack("<f", x)
    text = dec(V.float_decoder(), raw)
    assert struct.pack("<f", float(text)) == raw
    digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
    assert len(digits) <= 9


def test_float_examples():
    for value, want in [(0.1, "0.1"), (3.14, "3.14"), (3.4028235e38, "3.4028235e+38"), (-0.0, "-0.0"), (1, "1.0")]:
        assert dec(V.float_decoder(), struct.pack("<f", value)) == want


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_repr_roundtrips(x):
    raw = struct.pack("<d", x)
    assert struct.pack("<d", float(dec(V.double_decoder(), raw))) == raw


def date_bytes(y, m, d):
    return (y << 9 | m << 5 | d).to_bytes(3, "little")


@pytest.mark.parametrize("ymd,want", [((0, 0, 0), "0000-00-00"), ((2020, 0, 0), "2020-00-00"),
                                      ((2024, 2, 29), "2024-02-29"), ((9999, 12, 31), "9999-12-31")])
def test_date_keeps_zero_dates(ymd, want):
    assert dec(V.date_decoder(), date_bytes(*ymd)) == want


def datetime2_bytes(y, mo, d, h, mi, s, frac=0, fsp=0):
    ymd = (y * 13 + mo) << 5 | d
    hms = h << 12 | mi << 6 | s
    v = (ymd << 17 | hms) + 0x8000000000
    nb = (fsp + 1) // 2
    f = frac // 10 ** (6 - 2 * nb) if nb else 0
    return v.to_bytes(5, "big") + (f.to_bytes(nb, "big") if nb else b"")


@pytest.mark.parametrize("parts,fsp,want", [
    ((0, 0, 0, 0, 0, 0), 0, "0000-00-00 00:00:00"),
    ((9999, 12, 31, 23, 59, 59, 999999), 6, "9999-12-31 23:59:59.999999"),
    ((2024, 2, 29, 12, 34, 56, 789000), 3, "2024-02-29 12:34:56.789"),
    ((2001, 2, 3, 4, 5, 6, 1), 6, "2001-02-03 04:05:06.000001"),
    ((2001, 2, 3, 4, 5, 6, 500000), 1, "2001-02-03 04:05:06.5"),
])
def test_datetime_is_wall_clock_text_with_fsp_digits(parts, fsp, want):
    *ymdhms, = parts[:6]
    frac = parts[6] if len(parts) > 6 else 0
    assert dec(V.datetime2_decoder(fsp), datetime2_bytes(*ymdhms, frac=frac, fsp=fsp)) == want


def test_timestamp_is_utc_whatever_the_time_zones():
    raw = (1710000000).to_bytes(4, "big") + (123456).to_bytes(3, "big")
    assert dec(V.timestamp2_decoder(6), raw) == "2024-03-09 16:00:00.123456"
    assert dec(V.timestamp2_decoder(0), (2**31 - 1).to_bytes(4, "big")) == "2038-01-19 03:14:07"
    assert dec(V.timestamp2_decoder(0), b"\x00\x00\x00\x00") == "0000-00-00 00:00:00"
    assert dec(V.timestamp2_decoder(2), b"\x00\x00\x00\x00\x00") == "0000-00-00 00:00:00.00"


def time2_bytes_fsp6(neg, h, m, s, micros):
    packed = ((h << 12 | m << 6 | s) << 24) + micros
    if neg:
        packed = -packed
    return (packed + 0x800000000000).to_bytes(6, "big")


@pytest.mark.parametrize("args,want", [
    ((True, 838, 59, 59, 0), "-838:59:59.000000"), ((True, 0, 0, 0, 1), "-00:00:00.000001"),
    ((False, 12, 0, 0, 500000), "12:00:00.500000"), ((False, 0, 0, 0, 0), "00:00:00.000000"),
])
def test_time_fsp6(args, want):
    assert dec(V.time2_decoder(6), time2_bytes_fsp6(*args)) == want


def test_time_fsp0():
    raw = (0x800000 - (838 << 12 | 59 << 6 | 59)).to_bytes(3, "big")
    assert dec(V.time2_decoder(0), raw) == "-838:59:59"


@pytest.mark.parametrize("raw,want", [(0, "0000"), (1, "1901"), (255, "2155"), (124, "2024")])
def test_year(raw, want):
    assert dec(V.year_decoder(), bytes([raw])) == want


def test_enum_and_set():
    e = V.enum_decoder(1, ["a", "b", "c"])
    assert dec(e, b"\x00") == "" and dec(e, b"\x03") == "c"
    assert dec(V.enum_decoder(2, ["x"] * 300), (1).to_bytes(2, "little")) == "x"
    s = V.set_decoder(1, ["x", "y", "z"])
    assert dec(s, b"\x05") == "x,z" and dec(s, b"\x00") == "" and dec(s, b"\x07") == "x,y,z"


def test_text_is_decoded_with_its_charset():
    raw = "héllo 😀".encode()
    assert dec(V.string_decoder(1, "utf8"), bytes([len(raw)]) + raw) == "héllo 😀"
    latin = "café".encode("cp1252")
    assert dec(V.string_decoder(2, "cp1252"), len(latin).to_bytes(2, "little") + latin) == "café"


def test_binary_is_latin1_one_code_point_per_byte():
    raw = bytes(range(256))
    text = dec(V.string_decoder(2, None), len(raw).to_bytes(2, "little") + raw)
    assert text.encode("latin-1") == raw and len(text) == 256


def test_binary_n_gets_its_zero_padding_back():
    assert dec(V.string_decoder(1, None, pad_to=4), b"\x01a") == "a\x00\x00\x00"


def test_blob_length_prefix_sizes():
    for size in (1, 2, 3, 4):
        assert dec(V.string_decoder(size, None), (3).to_bytes(size, "little") + b"\x00\x80\xff") == "\x00\x80\xff"


def test_geometry_is_hex_of_srid_and_wkb():
    raw = bytes.fromhex("E6100000" "0101000000000000000000F03F0000000000000040")
    assert dec(V.geometry_decoder(4), len(raw).to_bytes(4, "little") + raw) == raw.hex().upper()


def test_mysql_binary_json_is_canonical_text():
    small_array = bytes([0x02]) + (1).to_bytes(2, "little") + (7).to_bytes(2, "little") + bytes([0x05, 1, 0])
    assert dec(V.json_decoder(4), len(small_array).to_bytes(4, "little") + small_array) == "[1]"
    literal_true = bytes([0x04, 0x01])
    assert dec(V.json_decoder(4), (2).to_bytes(4, "little") + literal_true) == "true"
