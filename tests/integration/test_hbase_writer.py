"""HBase writer conformance against the real HBase 2.6 + Thrift1 gateway (no mocks).

The shared golden batches (tests/support/golden.py) in STRING and NATIVE mode, applied once,
twice, in small chunks and after a partial apply followed by a full replay, must read back
to exactly the expected source rows, and their raw row keys and cells must be the bytes
docs/hbase.md documents (so a bug shared by the encoder and adapters/hbase/verify.py shows);
plus canal's example mapping loaded unchanged, autoCreateTable, declared NATIVE types, row-key
rules and the errors users meet.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

import happybase
import pytest

from adapters.base import Change
from adapters.hbase import HbaseTarget, make_writer, target_from_adapter
from adapters.hbase.values import bigdecimal_bytes, bigdecimal_text
from adapters.hbase.verify import read_rows
from pipeline.config import OuterAdapter
from pipeline.mapping import load_mapping
from pipeline.mapping.model import parse_mapping
from sluice_common.errors import ConfigError, TargetError, TransientError
from tests.support import golden
from tests.support.golden import GoldenTable
from tests.support.matrix import FULL

CANAL_EXAMPLE = Path("/work/shared/reference/canal-mappings/hbase/mytest_person2.yml")
MODES = ("STRING", "NATIVE")


@pytest.fixture(scope="module")
def target(hbase) -> HbaseTarget:
    return target_from_adapter(OuterAdapter(name="hbase", key="hb", hosts=f"{hbase['host']}:{hbase['port']}"),
                               "sluice.yml", "groups[0].outerAdapters[0]")


@pytest.fixture(scope="module")
def conn(hbase):
    c = happybase.Connection(hbase["host"], hbase["port"])
    yield c
    c.close()
    c = happybase.Connection(hbase["host"], hbase["port"])  # the first may have idled out
    for name in c.tables():
        if name.startswith(b"SLT_"):
            c.delete_table(name, disable=True)
    c.close()


def mapping_for(table: GoldenTable, mode: str, **extra):
    name = f"SLT_{table.name}_{uuid.uuid4().hex[:6]}"
    section = {"mode": mode, "database": table.database, "table": table.name, "hbaseTable": name,
               "autoCreateTable": True, **extra}
    if "rowKey" not in extra and "columns" not in extra:
        if len(table.pk) > 1:
            section["rowKey"] = ",".join(table.pk)
        else:
            section["columns"] = {table.pk[0]: "ROWKEY"}
    return parse_mapping({"hbaseMapping": section}, f"{name}.yml")


def apply(target, m, changes: list[Change], chunk: int = 1000):
    w = make_writer(target, (m,))
    w.open()
    try:
        for i in range(0, len(changes), chunk):
            w.apply(m, changes[i:i + chunk])
            w.commit()
    finally:
        w.close()
    return w.stats


def rows_of(conn, m, table: GoldenTable) -> list[dict]:
    got = read_rows(conn, m, table.mysql_type)
    return sorted(got.values(), key=lambda r: tuple(_sort(r.get(c)) for c in table.pk))


def _sort(v):
    return (0, int(v)) if v is not None and v.lstrip("-").isdigit() else (1, v or "")


def expected_rows(case) -> list[dict]:
    return sorted(case.expected, key=lambda r: tuple(_sort(r.get(c)) for c in case.table.pk))


def _cell(mysql_type: str, value: str, mode: str) -> bytes:
    """docs/hbase.md "Encodings" for the golden cases' types, written out independently."""
    if mode == "NATIVE" and mysql_type.startswith("bigint"):
        return int(value).to_bytes(8, "big", signed=True)          # LONG
    if mode == "NATIVE" and mysql_type.startswith("int("):
        return int(value).to_bytes(4, "big", signed=True)          # INTEGER
    if mode == "NATIVE" and mysql_type.startswith("decimal"):
        return _java_bigdecimal(value)                             # BIGDECIMAL
    return value.encode()                                          # text: UTF-8


def raw_rows(hbase: dict, m) -> dict[bytes, dict[bytes, bytes]]:
    """Every row of the mapping's HBase table as raw row key -> raw cells."""
    c = happybase.Connection(hbase["host"], hbase["port"])
    try:
        return dict(c.table(m.spec.hbaseTable).scan())
    finally:
        c.close()


def expected_raw(case, mode: str) -> dict[bytes, dict[bytes, bytes]]:
    """The expected rows as docs/hbase.md says they are stored: a single ROWKEY column encoded like
    a cell of the mode and not written as a cell; a composite key the values' text joined by '|',
    its columns written as cells too; NULL: no cell; qualifiers upper-cased in family CF."""
    t = case.table
    out = {}
    for r in case.expected:
        if len(t.pk) == 1:
            key = _cell(t.mysql_type[t.pk[0]], r[t.pk[0]], mode)
        else:
            key = b"|".join((r[c] or "").encode() for c in t.pk)
        out[key] = {b"CF:" + c.upper().encode(): _cell(t.mysql_type[c], v, mode) for c, v in r.items()
                    if v is not None and (len(t.pk) > 1 or c not in t.pk)}
    return out


def new_writer(target, m):
    w = make_writer(target, (m,))
    w.check()
    return w


# -- the golden conformance suite ----------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case_fn", golden.CASES, ids=lambda f: f.__name__)
def test_golden_once_twice_and_chunked(target, conn, hbase, mode, case_fn):
    case = case_fn()
    for how in ("batches", "twice", "chunks_of_2"):
        m = mapping_for(case.table, mode)
        new_writer(target, m)
        if how == "chunks_of_2":
            apply(target, m, case.changes, chunk=2)
        else:
            for batch in case.batches:
                apply(target, m, list(batch))
            if how == "twice":
                for batch in case.batches:
                    apply(target, m, list(batch))
        assert rows_of(conn, m, case.table) == expected_rows(case), (how, mode)
        assert raw_rows(hbase, m) == expected_raw(case, mode), (how, mode)  # the bytes, not the decoder


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case_fn", golden.CASES, ids=lambda f: f.__name__)
def test_golden_partial_apply_then_replay(target, conn, hbase, mode, case_fn):
    """A chunk half-applied (no transaction in HBase) and then the whole batch list replayed."""
    case = case_fn()
    changes = case.changes
    for cut in range(1, len(changes), max(1, len(changes) // 4)):
        m = mapping_for(case.table, mode)
        new_writer(target, m)
        apply(target, m, changes[:cut])
        apply(target, m, changes)
        assert rows_of(conn, m, case.table) == expected_rows(case), (cut, mode)
        assert raw_rows(hbase, m) == expected_raw(case, mode), (cut, mode)


@pytest.mark.parametrize("mode", MODES)
def test_every_type_reads_back_equal(target, conn, mode):
    t = golden.EVERY_TYPE
    m = mapping_for(t, mode)
    new_writer(target, m)
    row = golden.every_type_row()
    apply(target, m, [t.insert(row)])
    assert rows_of(conn, m, t) == [row]
    # replay twice: nothing changes
    apply(target, m, [t.insert(row)])
    apply(target, m, [t.insert(row)])
    assert rows_of(conn, m, t) == [row]


def _java_bigdecimal(text: str) -> bytes:
    """Bytes.toBytes(new BigDecimal(text)): the scale (4 bytes) and BigInteger.toByteArray() of the
    unscaled value (the fewest two's-complement bytes with a sign bit), written out here from the
    Java documentation, not from adapters/hbase/values.py."""
    whole, _, frac = text.partition(".")
    unscaled = int(whole + frac)
    bits = (-unscaled - 1).bit_length() if unscaled < 0 else unscaled.bit_length()
    return len(frac).to_bytes(4, "big") + unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def every_type_cells(mode: str) -> tuple[bytes, dict[bytes, bytes]]:
    """The row key and the cells docs/hbase.md "Encodings" gives for the golden every-type row:
    STRING the Dml text in UTF-8 (binary columns their raw bytes); NATIVE big-endian Java bytes
    per the inferred type (temporal, ENUM/SET, JSON and text stay UTF-8). NULL: no cell; the
    ROWKEY column (id) is not a cell."""
    v = golden.every_type_row()
    raw = {c: v[c].encode("latin-1") for c in ("bin", "blob", "bin4")}          # binary: the bytes
    text = {c: x.encode() for c, x in v.items() if c not in raw and c != "id" and x is not None}
    if mode == "STRING":
        return b"1", {b"CF:" + c.upper().encode(): x for c, x in {**text, **raw}.items()}
    native = {
        "u64": b"\xff" * 8,                                  # BIGINT UNSIGNED: LONG, the unsigned bits
        "i64": b"\x80" + b"\x00" * 7,                        # BIGINT: LONG
        "tiny1": b"\x00\xff",                                # TINYINT UNSIGNED: SHORT (255 fits no BYTE)
        "tiny_s": b"\x80",                                   # TINYINT: BYTE, signed
        "med_u": b"\x00\xff\xff\xff",                        # MEDIUMINT UNSIGNED: INTEGER
        "bit64": b"\xff" * 8, "bit5": b"\x05",                # BIT(n): ceil(n/8) bytes, unsigned
        "dec": _java_bigdecimal(v["dec"]),                    # DECIMAL: BIGDECIMAL, scale 30 kept
        "f32": struct.pack(">f", 1e-45), "f32b": struct.pack(">f", 1.1),  # FLOAT: 4 bytes IEEE 754
        "f32max": b"\x7f\x7f\xff\xff",
        "f64": struct.pack(">d", 2.2250738585072014e-308),   # DOUBLE: 8 bytes IEEE 754
        "y": b"\x00\x00",                                    # YEAR: SHORT, 0000 -> 0
    }
    assert native["f32"] == b"\x00\x00\x00\x01" and native["dec"][:4] == b"\x00\x00\x00\x1e"
    cells = {**text, **native, **raw}
    return (1).to_bytes(4, "big"), {b"CF:" + c.upper().encode(): x for c, x in cells.items()}  # id INT: 4 bytes


@pytest.mark.parametrize("mode", MODES)
def test_every_type_raw_cells_follow_the_documented_encoding(target, hbase, mode):
    """The cells themselves, not read back through adapters/hbase/verify.py: a bug that encode
    and decode share cannot hide here. Written once and replayed: the same bytes."""
    t = golden.EVERY_TYPE
    m = mapping_for(t, mode)
    new_writer(target, m)
    key, cells = every_type_cells(mode)
    assert len(cells) == len(t.columns) - 2  # every column but the row key and the NULL one
    for times in (1, 2):
        apply(target, m, [t.insert(golden.every_type_row())])
        fresh = happybase.Connection(hbase["host"], hbase["port"])
        try:
            got = list(fresh.table(m.spec.hbaseTable).scan())
        finally:
            fresh.close()
        assert [k for k, _ in got] == [key], times
        assert got[0][1] == cells, (times, {c: (got[0][1].get(c), x) for c, x in cells.items()
                                             if got[0][1].get(c) != x})


def test_native_bytes_are_java_bytes(target, conn):
    """NATIVE cells are what Java's Bytes.toBytes gives for the inferred type."""
    t = GoldenTable("nat", (("id", "bigint(20)"), ("i", "int(11)"), ("s", "smallint(6)"),
                            ("u", "int(10) unsigned"), ("d", "decimal(10,2)"),
                            ("f", "double"), ("b", "bit(12)"), ("v", "varchar(10)")), pk=("id",))
    m = mapping_for(t, "NATIVE")
    new_writer(target, m)
    apply(target, m, [t.insert(t.row(id="7", i="-2", s="300", u="4294967295", d="-1.50", f="0.5", b="4095",
                                     v="hé"))])
    key, cells = next(iter(conn.table(m.spec.hbaseTable).scan()))
    assert key == (7).to_bytes(8, "big")
    assert cells == {b"CF:I": b"\xff\xff\xff\xfe", b"CF:S": b"\x01\x2c", b"CF:U": b"\x00\x00\x00\x00\xff\xff\xff\xff",
                     b"CF:D": b"\x00\x00\x00\x02\xff\x6a", b"CF:F": b"\x3f\xe0\x00\x00\x00\x00\x00\x00",
                     b"CF:B": b"\x0f\xff", b"CF:V": "hé".encode()}
    assert bigdecimal_text(bigdecimal_bytes("-1.50")) == "-1.50"


def test_update_to_null_deletes_cell_and_back(target, conn):
    """A cell set to NULL and back in consecutive chunks (same millisecond) is never lost."""
    t = golden.ACCOUNTS
    m = mapping_for(t, "STRING")
    new_writer(target, m)
    row = t.row(id="1", name="a", balance="1.00", note="x", score="1")
    changes = [t.insert(row)]
    for i in range(150):
        ch, row = t.update(row, note=None)
        changes.append(ch)
        ch, row = t.update(row, note=f"n{i}")
        changes.append(ch)
    apply(target, m, changes, chunk=1)
    assert rows_of(conn, m, t) == [row]
    cells = conn.table(m.spec.hbaseTable).row(b"1")
    assert cells[b"CF:NOTE"] == b"n149"
    ch, row = t.update(row, note=None, score=None)
    apply(target, m, [ch])
    assert b"CF:NOTE" not in conn.table(m.spec.hbaseTable).row(b"1")
    assert rows_of(conn, m, t) == [row]


def test_delete_and_reinsert_same_key_in_one_chunk(target, conn):
    """HBase's mutateRows puts before it deletes: the writer must still end with the row."""
    t = golden.ACCOUNTS
    m = mapping_for(t, "STRING")
    new_writer(target, m)
    rows = [t.row(id=str(i), name=f"v{i}", balance="1.00") for i in range(50)]
    apply(target, m, [t.insert(r) for r in rows])
    again = [t.row(id=str(i), name=f"w{i}", balance="2.00", note="again") for i in range(50)]
    apply(target, m, [c for r, a in zip(rows, again, strict=True) for c in (t.delete(r), t.insert(a))])
    assert rows_of(conn, m, t) == again


# -- the canal example mapping, row keys, declared types ------------------------------------
def test_canal_example_mapping_unchanged(target, conn):
    m = load_mapping(CANAL_EXAMPLE)
    spec = m.spec
    assert spec.hbaseTable == "MYTEST.PERSON2" and spec.mode == "STRING"
    if spec.hbaseTable.encode() in conn.tables():
        conn.delete_table(spec.hbaseTable, disable=True)
    conn.create_table(spec.hbaseTable, {"CF": {"max_versions": 1}})
    try:
        make_writer(target, (m,)).check()
        t = GoldenTable("person2", (("id", "bigint(20)"), ("name", "varchar(50)"), ("email", "varchar(50)"),
                                    ("type", "varchar(10)"), ("c_time", "datetime"), ("birthday", "date"),
                                    ("lat", "decimal(9,6)")), pk=("id",), database="mytest")
        r1 = t.row(id="1", name="Ann", email="a@x", type="a", c_time="2024-01-02 03:04:05", birthday="1990-05-06",
                   lat="1.500000")
        r2 = t.row(id="2", name="Bob", type="b", c_time="2024-01-02 03:04:05")
        ch1, r1 = t.update(r1, email=None, name="Ann B")
        r3 = {**r2, "id": "22"}
        changes = [t.insert(r1 | {"email": "a@x", "name": "Ann"}), t.insert(r2), ch1, t.delete(r2), t.insert(r3)]
        apply(target, m, changes)
        apply(target, m, changes)  # replay
        table = conn.table(spec.hbaseTable)
        keys = [k for k, _ in table.scan()]
        assert keys == [b"000000000000001", b"000000000000022"]  # ROWKEY LEN:15, zero-padded
        assert table.row(b"000000000000001") == {
            b"CF:NAME": b"Ann B", b"CF:TYPE": b"a", b"CF:C_TIME": b"2024-01-02 03:04:05",
            b"CF:BIRTHDAY": b"1990-05-06", b"CF:LAT": b"1.500000"}  # unmapped lat: own name, default family
        assert rows_of(conn, m, t) == [r1, r3]
    finally:
        conn.delete_table(spec.hbaseTable, disable=True)


def test_composite_rowkey_separator_and_exclude(target, conn):
    t = golden.COMPOSITE
    m = mapping_for(t, "STRING", rowKey="order_no,line", rowKeySeparator="#", excludeColumns=["qty"],
                    columns={"sku": "D:ITEM_SKU"}, uppercaseQualifier=False)
    new_writer(target, m)
    apply(target, m, [t.insert(t.row(order_no="A", line="2", sku="x", qty="3"))])
    assert conn.table(m.spec.hbaseTable).row(b"A#2") == {b"CF:order_no": b"A", b"CF:line": b"2", b"D:ITEM_SKU": b"x"}


def test_native_declared_types(target, conn):
    t = GoldenTable("decl", (("id", "int(11)"), ("n", "decimal(20,0)"), ("flag", "tinyint(1)"),
                             ("at", "datetime(6)"), ("z", "date"), ("txt", "varchar(9)")), pk=("id",))
    m = mapping_for(t, "NATIVE", columns={"id": "ROWKEY$STRING", "n": "N$LONG", "flag": "F$BOOLEAN",
                                          "at": "AT$DATE", "z": "Z$DATE", "txt": "T$BYTES"})
    new_writer(target, m)
    apply(target, m, [t.insert(t.row(id="5", n="-3", flag="2", at="1970-01-01 00:00:01.5009", z="0000-00-00",
                                     txt="ü"))])
    cells = conn.table(m.spec.hbaseTable).row(b"5")
    assert cells == {b"CF:N": (-3).to_bytes(8, "big", signed=True), b"CF:F": b"\xff",
                     b"CF:AT": (1500).to_bytes(8, "big"), b"CF:T": "ü".encode()}  # zero date: no cell
    with pytest.raises(TargetError, match=r"column 'n' .*does not fit 64 bits"):
        apply(target, m, [t.insert(t.row(id="6", n="99999999999999999999"))])


def test_rowkey_len_non_numeric_and_negative(target, conn):
    t = GoldenTable("rk", (("code", "varchar(10)"), ("v", "int(11)")), pk=("code",))
    m = mapping_for(t, "STRING", columns={"code": "ROWKEY LEN:5"})
    new_writer(target, m)
    apply(target, m, [t.insert(t.row(code="-42", v="1")), t.insert(t.row(code="ab", v="2")),
                      t.insert(t.row(code="1234567", v="3"))])
    apply(target, m, [t.delete(t.row(code="ab", v="2"))])
    assert [k for k, _ in conn.table(m.spec.hbaseTable).scan()] == [b"-0042", b"1234567"]


# -- tables, families, errors ---------------------------------------------------------------
def test_auto_create_table_with_all_families(target, conn):
    t = golden.ACCOUNTS
    m = mapping_for(t, "STRING", columns={"id": "ROWKEY", "name": "P:NAME", "note": "X:NOTE"}, family="BASE")
    assert m.spec.hbaseTable.encode() not in conn.tables()
    new_writer(target, m)
    assert set(conn.table(m.spec.hbaseTable).families()) == {b"BASE", b"P", b"X"}
    new_writer(target, m)  # idempotent


def test_missing_table_and_family_are_clear_errors(target, conn):
    t = golden.ACCOUNTS
    m = mapping_for(t, "STRING", autoCreateTable=False)
    name = m.spec.hbaseTable
    with pytest.raises(TargetError, match=rf"HBase table {name} .* does not exist") as e:
        make_writer(target, (m,)).check()
    assert "autoCreateTable" in str(e.value)
    conn.create_table(name, {"OTHER": {}})
    with pytest.raises(TargetError, match=r"(?s)has no column family CF .*alter"):
        make_writer(target, (m,)).check()
    conn.delete_table(name, disable=True)
    w = make_writer(target, (m,))  # dropped while syncing: terminal, names the table
    w.open()
    w.apply(m, [t.insert(t.row(id="1", name="a"))])
    with pytest.raises(TargetError, match=rf"{name} does not exist"):
        w.commit()
    w.close()


def test_phoenix_mode_is_refused(target):
    m = parse_mapping({"hbaseMapping": {"mode": "PHOENIX", "database": "d", "table": "t", "hbaseTable": "T",
                                        "columns": {"id": "ROWKEY"}}}, "ph.yml")
    with pytest.raises(ConfigError, match=r"ph.yml: hbaseMapping.mode: PHOENIX mode is not supported"):
        make_writer(target, (m,)).check()


def test_unreachable_thrift_is_target_error_in_check_and_transient_in_commit(target):
    dead = HbaseTarget(host="127.0.0.1", port=1, key="dead")
    m = mapping_for(golden.ACCOUNTS, "STRING")
    with pytest.raises(TargetError, match=r"127.0.0.1:1 \(dead\) is not reachable"):
        make_writer(dead, (m,)).check()
    w = make_writer(dead, (m,))
    w.open()
    w.apply(m, [golden.ACCOUNTS.insert(golden.ACCOUNTS.row(id="1"))])
    with pytest.raises(TransientError, match=r"127.0.0.1:1 .*unreachable"):
        w.commit()


def test_config_from_canal_properties():
    a = OuterAdapter(name="hbase", properties={"thrift.host": "h1", "thrift.port": 9091, "thrift.timeout": 5000})
    assert target_from_adapter(a, "f", "k") == HbaseTarget(host="h1", port=9091, timeout_ms=5000)
    with pytest.raises(ConfigError, match=r"hbase.zookeeper.quorum: is a ZooKeeper address"):
        target_from_adapter(OuterAdapter(name="hbase", properties={"hbase.zookeeper.quorum": "zk1"}), "f", "k")
    with pytest.raises(ConfigError, match=r"k.hosts: is required"):
        target_from_adapter(OuterAdapter(name="hbase"), "f", "k")


def test_pooled_connection_survives_the_idle_drop(target, hbase):
    """The gateway closes sockets idle for 60 s; the next chunk must still go through."""
    t = golden.ACCOUNTS
    m = mapping_for(t, "STRING")
    new_writer(target, m)
    apply(target, m, [t.insert(t.row(id="1", name="a"))])  # leaves a pooled connection
    w = make_writer(target, (m,))
    w.open()
    time.sleep(62)
    w.apply(m, [t.insert(t.row(id="2", name="b"))])
    w.commit()
    w.close()
    with_fresh = happybase.Connection(hbase["host"], hbase["port"])
    assert [r["id"] for r in rows_of(with_fresh, m, t)] == ["1", "2"]
    with_fresh.close()


@pytest.mark.parametrize("mode", MODES)
def test_keys_of_every_kind_as_raw_row_keys(target, hbase, mode):
    """Composite row keys of binary bytes with NUL, DECIMAL, DATETIME(6) and non-ASCII text,
    checked as raw bytes against docs/hbase.md (text UTF-8, binary raw, joined by '|'), after
    insert, update, key change, delete, a replay and a partial apply followed by everything."""
    batches, expected = golden.keys_of_every_kind()
    changes = [c for b in batches for c in b]

    def raw_key(r: dict) -> bytes:
        return b"|".join([r["kb"].encode("latin-1"), r["kd"].encode(), r["kt"].encode(), r["ks"].encode()])

    for how in ("once", "twice", "partial"):
        m = mapping_for(golden.KEYS, mode)
        new_writer(target, m)
        if how == "partial":
            apply(target, m, changes[:6])
        apply(target, m, changes)
        if how == "twice":
            apply(target, m, changes)
        conn = happybase.Connection(hbase["host"], hbase["port"])  # the module's may have idled out
        rows = dict(conn.table(m.spec.hbaseTable).scan())
        conn.close()
        assert sorted(rows) == sorted(raw_key(r) for r in expected), (how, mode)
        for r in expected:
            assert rows[raw_key(r)][b"CF:V"] == r["v"].encode(), (how, mode)
            assert rows[raw_key(r)][b"CF:KB"] == r["kb"].encode("latin-1")


if not FULL:  # long form (SLUICE_E2E_FULL=1; CI budget): it waits out the Thrift server's real 60 s idle timeout
    del test_pooled_connection_survives_the_idle_drop
