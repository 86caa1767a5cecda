"""Golden change batches shared by the adapter conformance suites (RDB, ES, HBase).

Each :class:`GoldenCase` is a source table (columns with their ``mysqlType``), batches of
single-row :class:`Change` records exactly as the job hands them to an adapter (Dml
strings, PK-changing UPDATEs already split into DELETE + INSERT), and the expected final
rows as Dml strings. An adapter passes a case when applying the batches -- once, twice, or
after a partial apply followed by a full replay -- leaves exactly ``expected`` behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adapters.base import Change

Row = dict[str, str | None]


@dataclass(frozen=True)
class GoldenTable:
    name: str
    columns: tuple[tuple[str, str], ...]  # (column, mysqlType)
    pk: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    database: str = "golden_src"

    @property
    def mysql_type(self) -> dict[str, str]:
        return dict(self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    def row(self, **values: str | None) -> Row:
        """A full row image (missing columns are NULL)."""
        return {c: values.get(c) for c in self.names}

    def insert(self, row: Row) -> Change:
        return Change("INSERT", self.database, self.name, dict(row), None, self.pk, self.mysql_type)

    def update(self, before: Row, **changes: str | None) -> tuple[Change, Row]:
        after = {**before, **changes}
        old = {k: before[k] for k in changes}
        return Change("UPDATE", self.database, self.name, after, old, self.pk, self.mysql_type), after

    def delete(self, row: Row) -> Change:
        return Change("DELETE", self.database, self.name, dict(row), None, self.pk, self.mysql_type)

    def truncate(self) -> Change:
        return Change("TRUNCATE", self.database, self.name, {}, None, self.pk, self.mysql_type)


@dataclass(frozen=True)
class GoldenCase:
    name: str
    table: GoldenTable
    batches: tuple[tuple[Change, ...], ...]
    expected: tuple[Row, ...]  # final rows (order: by pk, or as listed for key-less tables)
    inserts: int = field(default=0)  # INSERT changes in all batches (replays skip those that exist)

    @property
    def changes(self) -> list[Change]:
        return [c for b in self.batches for c in b]


def _case(name: str, table: GoldenTable, batches: list[list[Change]], expected: list[Row]) -> GoldenCase:
    n = sum(1 for b in batches for c in b if c.kind == "INSERT")
    return GoldenCase(name, table, tuple(tuple(b) for b in batches), tuple(expected), n)


ACCOUNTS = GoldenTable("accounts", (("id", "bigint(20)"), ("name", "varchar(40)"), ("balance", "decimal(12,2)"),
                                    ("note", "varchar(100)"), ("score", "int(11)")), pk=("id",))


def basic() -> GoldenCase:
    """Inserts, updates (some twice in a row for one key), deletes, in several batches."""
    t = ACCOUNTS
    rows = {i: t.row(id=str(i), name=f"user {i}", balance=f"{i}.50", note=None, score=str(i * 10)) for i in range(1, 9)}
    b1 = [t.insert(rows[i]) for i in range(1, 9)]
    b2 = []
    for i in (2, 3, 2, 5):
        ch, rows[i] = t.update(rows[i], balance=f"{int(float(rows[i]['balance'])) + 100}.25", note=f"n{i}")
        b2.append(ch)
    b2 += [t.delete(rows[4]), t.delete(rows[6])]
    b3 = [t.insert(t.row(id="4", name="user 4 again", balance="4.00", note="back", score=None))]
    ch, rows[1] = t.update(rows[1], name="renamed ü🚀")
    b3 += [ch, t.delete(rows[8])]
    rows[4] = t.row(id="4", name="user 4 again", balance="4.00", note="back", score=None)
    for k in (6, 8):
        rows.pop(k)
    return _case("basic", t, [b1, b2, b3], [rows[k] for k in sorted(rows)])


def truncate() -> GoldenCase:
    t = ACCOUNTS
    a = [t.insert(t.row(id=str(i), name=f"a{i}", balance="0.00")) for i in range(1, 4)]
    b = [t.truncate(), t.insert(t.row(id="7", name="after", balance="7.70"))]
    return _case("truncate", t, [a, b], [t.row(id="7", name="after", balance="7.70")])


def pk_swap() -> GoldenCase:
    """Two rows exchange their ids (the job splits each PK-changing UPDATE into DELETE + INSERT)."""
    t = ACCOUNTS
    r1, r2 = t.row(id="1", name="alice", balance="1.00"), t.row(id="2", name="bob", balance="2.00")
    tmp = {**r1, "id": "-1"}
    b1 = [t.insert(r1), t.insert(r2)]
    b2 = [t.delete(r1), t.insert(tmp), t.delete(r2), t.insert({**r2, "id": "1"}), t.delete(tmp),
          t.insert({**r1, "id": "2"})]
    ch, _ = t.update({**r1, "id": "2"}, note="swapped")
    return _case("pk_swap", t, [b1, b2, [ch]],
                 [{**r2, "id": "1"}, {**r1, "id": "2", "note": "swapped"}])


COMPOSITE = GoldenTable("line_items", (("order_no", "varchar(20)"), ("line", "int(11)"), ("sku", "varchar(20)"),
                                       ("qty", "int(11)")), pk=("order_no", "line"))


def composite_key() -> GoldenCase:
    t = COMPOSITE
    rows = {(o, n): t.row(order_no=o, line=str(n), sku=f"sku-{o}-{n}", qty="1") for o in ("A-1", "B-2") for n in (1, 2)}
    b1 = [t.insert(r) for r in rows.values()]
    ch1, rows[("A-1", 2)] = t.update(rows[("A-1", 2)], qty="5")
    ch2, rows[("B-2", 1)] = t.update(rows[("B-2", 1)], qty="7")
    b2 = [ch1, ch2, t.delete(rows[("B-2", 2)])]
    rows.pop(("B-2", 2))
    return _case("composite_key", t, [b1, b2], [rows[k] for k in sorted(rows)])


EVENTS = GoldenTable("events", (("kind", "varchar(20)"), ("payload", "varchar(50)"), ("n", "int(11)")))


def no_primary_key() -> GoldenCase:
    """A key-less table: UPDATE/DELETE match one row on all columns (duplicates stay duplicates)."""
    t = EVENTS
    a, b = t.row(kind="click", payload="x", n="1"), t.row(kind="view", payload=None, n="2")
    b1 = [t.insert(a), t.insert(a), t.insert(b)]
    ch, a2 = t.update(a, n="5")
    b2 = [ch, t.delete(b)]
    return _case("no_primary_key", t, [b1, b2], [a, a2])


KEYS = GoldenTable("keys_every_kind", (("kb", "varbinary(8)"), ("kd", "decimal(10,4)"), ("kt", "datetime(6)"),
                                       ("ks", "varchar(20)"), ("v", "varchar(20)")), pk=("kb", "kd", "kt", "ks"))


def keys_of_every_kind() -> tuple[list[list[Change]], list[dict]]:
    """A composite key of binary bytes with NUL, a negative DECIMAL, DATETIME(6) and non-ASCII text
    with case and trailing-space variants: insert, update, key change (as the job splits it),
    delete, and a key a _ci collation equates with a deleted one."""
    t = KEYS
    r = [t.row(kb="\x00\x01", kd="-12.5000", kt="2024-02-29 23:59:59.000001", ks="ü🚀", v="a"),
         t.row(kb="a\x00b", kd="0.0001", kt="1970-01-01 00:00:00.000000", ks="Zz", v="b"),
         t.row(kb="\x00", kd="99999.9999", kt="2038-01-19 03:14:08.999999", ks="日本 語", v="c"),
         t.row(kb="", kd="0.0000", kt="2000-01-01 00:00:00.500000", ks="x", v="d")]
    upd, r0 = t.update(r[0], v="a2")
    moved = {**r[1], "kb": "a\x00c", "ks": "zZ "}
    b1 = [t.insert(x) for x in r]
    b2 = [upd, t.delete(r[1]), t.insert(moved), t.delete(r[2])]
    again = {**r[2], "ks": "日本 語 ", "v": "c2"}
    b3 = [t.insert(again), t.delete(r[3])]
    return [b1, b2, b3], [r0, moved, again]


CASES = (basic, truncate, pk_swap, composite_key)


#: One row with every MySQL type at its edges, as the capture stage encodes it (Dml strings).
EVERY_TYPE_VALUES: tuple[tuple[str, str, str | None], ...] = (
    ("id", "int(11)", "1"),
    ("u64", "bigint(20) unsigned", "18446744073709551615"),
    ("i64", "bigint(20)", "-9223372036854775808"),
    ("tiny1", "tinyint(1) unsigned", "255"),
    ("tiny_s", "tinyint(4)", "-128"),
    ("med_u", "mediumint(8) unsigned", "16777215"),
    ("bit64", "bit(64)", "18446744073709551615"),
    ("bit5", "bit(5)", "5"),
    ("dec", "decimal(65,30)", "-12345678901234567890123456789012345.123456789012345678901234567890"),
    ("f32", "float", "1e-45"),  # the smallest float32 subnormal
    ("f32b", "float", "1.1"),
    ("f32max", "float", "3.4028235e+38"),
    ("f64", "double", "2.2250738585072014e-308"),
    ("d", "date", "2024-02-29"),
    ("d0", "date", "0000-00-00"),
    ("dt6", "datetime(6)", "2024-11-03 01:30:00.123456"),  # twice a day in America/New_York
    ("dt0", "datetime", "0000-00-00 00:00:00"),
    ("ts6", "timestamp(6)", "2024-11-03 05:30:00.654321"),  # UTC: 01:30 EDT, the first of the two
    ("ts0", "timestamp", "0000-00-00 00:00:00"),
    ("tm", "time(6)", "-838:59:59.000000"),
    ("tm2", "time", "25:00:01"),
    ("y", "year(4)", "0000"),
    ("e", "enum('small','large')", ""),
    ("e2", "enum('small','large')", "large"),
    ("s", "set('a','b','c')", "a,c"),
    ("j", "json", '{"a": [1, 2.5, "x"], "b": null, "c": "ü🚀"}'),
    ("txt", "varchar(60)", "emoji 🚀 ü \\ ' \" %s %(x)s ` ;--"),
    ("bin", "varbinary(16)", "\x00\x80\xff'\\\x00\n\x1a"),
    ("blob", "blob", bytes(range(256)).decode("latin-1")),
    ("bin4", "binary(4)", "\x00\x01\x00\x00"),
    ("ch", "char(5)", "ab"),
    ("nul", "varchar(5)", None),
)
EVERY_TYPE = GoldenTable("every_type", tuple((c, t) for c, t, _ in EVERY_TYPE_VALUES), pk=("id",))


def every_type_row() -> Row:
    return {c: v for c, _, v in EVERY_TYPE_VALUES}
