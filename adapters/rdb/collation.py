"""Key values as the target compares them: folds at least as coarse as a column's equality.

Changes are partitioned by key, and two keys the target's collation equates are one row there
(``'Z'``, ``'z'`` and ``'z '`` under a ``_ci`` PAD SPACE collation), so they must share a
partition. A *fold* maps a key value to a text such that values the target calls equal get
equal folds; coarser is always safe (more keys share a partition), finer never is.

The kinds, chosen per key column by :func:`fold_kind`:

* ``None`` -- exact: numbers, binary strings, deterministic PostgreSQL collations, SQLite BINARY;
* ``"rtrim"`` -- trailing spaces stripped: MySQL/MariaDB ``*_bin`` (PAD SPACE), PostgreSQL
  ``char(n)``, SQLite RTRIM;
* ``"lower"`` -- trailing spaces stripped and lower-cased: SQLite NOCASE;
* ``"w:<charset>:<collation>"`` -- the collation's own weight string, from the target server
  (``WEIGHT_STRING``), with trailing space weights stripped (PAD SPACE compares as if padded;
  for NO PAD collations stripping is merely coarser). Equal weight strings are what the server
  calls equal, contractions, expansions and ignorable characters included. Multi-level
  collations (accent or case sensitive UCA) fold by their ``ai_ci`` sibling: equal at every
  level implies equal at the first;
* :data:`ORDERED` -- no fold is known (a PostgreSQL nondeterministic collation, a collation the
  server cannot weigh): the table is applied as one ordered stream instead.

Weights are asked per distinct value (cached); for collations without contractions among
ASCII characters, an ASCII value's weight string is the concatenation of its characters'
weights, read once per collation (tests/integration/test_rdb_collation.py proves both paths
against the server for every collation family listed in :data:`_ASCII_PER_CHAR`).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.engine import Connection

ORDERED = "ordered"
#: collations whose weight string of an ASCII text is the concatenation of per-character weights
_ASCII_PER_CHAR = re.compile(
    r"^(?:[a-z0-9]+_(?:general(?:_mysql500|_nopad)?_ci|unicode(?:_520)?(?:_nopad)?_ci|0900_ai_ci"
    r"|uca1400(?:_nopad)?_ai_ci)|latin1_swedish_ci|uca1400(?:_nopad)?_ai_ci)$")
_MULTI_LEVEL = re.compile(r"^(?P<base>.*(?:uca1400|_0900)(?:_nopad)?)_a[is]_c[is](?:_ks)?$")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_MAX_CACHE = 200_000
_PER_QUERY = 400


def fold_kind(family: str, col: Any) -> str | None:
    """How ``col`` (an :class:`~adapters.rdb.schema.ColumnInfo`) of a target in ``family``
    compares values: a fold kind (see the module docstring)."""
    if family == "mysql":
        coll = (col.collation or "").lower()
        if not coll or coll == "binary" or not col.charset:
            return None
        if coll.endswith("_bin"):
            return "rtrim"
        m = _MULTI_LEVEL.match(coll)
        if m:
            coll = m.group("base") + "_ai_ci"
        return f"w:{col.charset}:{coll}"
    if family == "postgresql":
        if not getattr(col, "deterministic", True):
            return ORDERED
        if isinstance(col.type, pg.CITEXT):
            return ORDERED
        return "rtrim" if type(col.type).__name__ in ("CHAR", "NCHAR") else None
    coll = (col.collation or "").upper()
    if coll == "NOCASE":
        return "lower"
    return "rtrim" if coll == "RTRIM" else None


class Folder:
    """Folds values by one MySQL/MariaDB collation, asking the server for weight strings.

    ``conn_factory()`` gives a context manager yielding a SQLAlchemy connection to the target.
    Thread-safe; the caches live as long as the process (collation weights never change)."""

    def __init__(self, conn_factory, charset: str, collation: str):
        if not (_NAME.match(charset) and _NAME.match(collation)):
            raise ValueError(f"not a collation name: {charset!r} {collation!r}")
        self._conn = conn_factory
        self.charset, self.collation = charset, collation
        self._lock = threading.Lock()
        self._cache: dict[str, str] = {}
        self._ascii: list[bytes] | None = None
        self._space = b""
        self._per_char = bool(_ASCII_PER_CHAR.match(collation))

    def _expr(self) -> str:
        return f"HEX(WEIGHT_STRING(CONVERT(%s USING {self.charset}) COLLATE {self.collation}))"

    def _weigh(self, conn: Connection, values: list[str]) -> list[bytes]:
        out: list[bytes] = []
        for a in range(0, len(values), _PER_QUERY):
            part = values[a:a + _PER_QUERY]
            row = conn.exec_driver_sql("SELECT " + ", ".join([self._expr()] * len(part)), tuple(part)).fetchone()
            out += [bytes.fromhex(h or "") for h in row]
        return out

    def _prepare(self, conn: Connection) -> None:
        chars = [chr(i) for i in range(128)]
        weights = self._weigh(conn, [*chars, " "])
        self._space = weights[-1]
        self._ascii = weights[:128]

    def _strip(self, w: bytes) -> str:
        sp, n = self._space, len(self._space)
        if n:
            while w.endswith(sp) and (len(w) - n) % n == 0:
                w = w[:-n]
        return w.hex()

    def fold(self, values: list[str]) -> list[str]:
        """The folds of ``values`` (strings), in order."""
        with self._lock:
            cache = self._cache
            missing = [v for v in dict.fromkeys(values) if v not in cache]
            if missing or self._ascii is None:
                self._fill(missing)
            return [cache[v] for v in values]

    def _fill(self, missing: list[str]) -> None:
        cache, todo = self._cache, []
        if len(cache) + len(missing) > _MAX_CACHE:
            cache.clear()
        if self._ascii is None:
            with self._conn() as conn:
                self._prepare(conn)
        table = self._ascii
        for v in missing:
            if self._per_char and v.isascii():
                cache[v] = self._strip(b"".join(map(table.__getitem__, map(ord, v))))
            else:
                todo.append(v)
        if todo:
            with self._conn() as conn:
                for v, w in zip(todo, self._weigh(conn, todo), strict=True):
                    cache[v] = self._strip(w)


def simple_fold(kind: str, value: str) -> str:
    """The ``rtrim`` / ``lower`` folds (no server needed)."""
    value = value.rstrip(" ")
    return value.lower() if kind == "lower" else value


_folders: dict[tuple[Any, str], Folder] = {}
_folders_lock = threading.Lock()


def folder(target: Any, kind: str) -> Folder:
    """The process-wide :class:`Folder` of a ``w:<charset>:<collation>`` kind on ``target``."""
    with _folders_lock:
        f = _folders.get((target, kind))
        if f is None:
            from adapters.rdb.client import engine_for

            _, charset, collation = kind.split(":", 2)
            f = _folders[(target, kind)] = Folder(lambda: engine_for(target).connect(), charset, collation)
        return f


def fold_values(target: Any, kind: str, values: list[str]) -> list[str]:
    """The folds of ``values`` (key column texts) by ``kind`` on ``target``."""
    if kind.startswith("w:"):
        return folder(target, kind).fold(values)
    return [simple_fold(kind, v) for v in values]
