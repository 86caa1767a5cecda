"""``sluice verify``'s side of the RDB compare: the report record and the source.

* :class:`TableDiff`: what verify found for one table (or ES/HBase mapping), as reported;
* :func:`pairs_for`: the :class:`adapters.base.TablePair` s a ``dbMapping`` resolves to (every
  table of the database for ``mirrorDb``), from the source's catalog (pipeline/source/catalog.py);
* :func:`connect_source`: the source connection the compares read with (time zone UTC).

The compare itself is the target adapter's (``make_verifier`` through adapters/registry.py; the
RDB one, chunked checksums, is adapters/rdb/verify.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pymysql

from adapters.base import Column, TablePair
from pipeline.source import catalog


@dataclass
class TableDiff:
    """What ``sluice verify`` found for one table."""

    mapping: str
    kind: str
    source: str
    target: str
    method: str = ""
    source_rows: int = 0
    target_rows: int = 0
    chunks: int = 0
    differing_chunks: int = 0
    missing: list = field(default_factory=list)   # keys in the source only
    extra: list = field(default_factory=list)     # keys in the target only
    changed: list = field(default_factory=list)   # keys whose values differ
    changed_columns: Counter = field(default_factory=Counter)  # target column -> changed rows
    sampled: int | None = None
    #: why the table could not be compared (then nothing else is meaningful)
    error: str | None = None
    #: the error is a config/mapping problem (exit 2), not a failure to reach or read (exit 1)
    config_error: bool = False
    #: a remark on a difference, e.g. counts differ while the sample matched
    note: str | None = None
    seconds: float = 0.0
    #: the group whose mapping this is (the repair command names it)
    group: str = ""

    @property
    def differing(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.changed)

    @property
    def ok(self) -> bool:
        """Compared, and equal (also in row counts)."""
        return self.error is None and self.differing == 0 and self.source_rows == self.target_rows

    def as_dict(self, max_keys: int = 50) -> dict[str, Any]:
        return {"mapping": self.mapping, "kind": self.kind, "source": self.source, "target": self.target,
                "method": self.method, "ok": self.ok, "source_rows": self.source_rows,
                "target_rows": self.target_rows, "chunks": self.chunks, "differing_chunks": self.differing_chunks,
                "differing_rows": self.differing, "missing": len(self.missing), "extra": len(self.extra),
                "changed": len(self.changed), "changed_columns": dict(self.changed_columns),
                "sampled": self.sampled,
                "keys": {"missing": [_key(k) for k in self.missing[:max_keys]],
                         "extra": [_key(k) for k in self.extra[:max_keys]],
                         "changed": [_key(k) for k in self.changed[:max_keys]]},
                "error": self.error, "config_error": self.config_error, "note": self.note,
                "seconds": round(self.seconds, 3), "group": self.group}

    def repair_args(self) -> list[str]:
        """The arguments of the ``sluice repair`` that brings this table back (after ``--config``);
        empty when it is equal or could not be compared."""
        if self.ok or self.error or not self.group:
            return []
        from adapters.registry import capabilities

        whole = capabilities(self.kind).compare == "checksums"  # a table compared row by row
        what = ["--table", self.source] if whole else ["--mapping", self.mapping]
        return ["--group", self.group, *what]


def _key(k: Any) -> Any:
    if isinstance(k, tuple) and len(k) == 1:
        k = k[0]
    if isinstance(k, bytes):
        return k.decode("latin-1")
    if isinstance(k, tuple):
        return [x.decode("latin-1") if isinstance(x, bytes) else x for x in k]
    return k


# -- SQL helpers -------------------------------------------------------------------------------
# -- resolving a dbMapping into table pairs ----------------------------------------------------
def source_columns(cur: Any, db: str, table: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``[(name, DATA_TYPE, COLUMN_TYPE)]`` (MariaDB's JSON columns with the DATA_TYPE ``json``)
    and the primary key columns in key order."""
    cols = catalog.columns(cur, db, table)
    json_cols = catalog.json_checked_columns(cur, db, table)
    return ([(c.name, "json" if c.name in json_cols else c.data_type, c.column_type) for c in cols],
            catalog.primary_key(cur, db, table))


def pairs_for(cur: Any, mapping: Any) -> list[TablePair]:
    """The table pairs of a ``dbMapping`` (every table of the database for mirrorDb)."""
    spec = mapping.spec
    tables = catalog.tables(cur, spec.database) if spec.mirrorDb else [spec.table]
    out = []
    for t in tables:
        cols, pk = source_columns(cur, spec.database, t)
        types = {c[0]: c for c in cols}
        mapped = spec.column_mapping([c[0] for c in cols])
        if spec.mirrorDb or not spec.primary_key:
            key_src = [c for c in pk if c in mapped]
        else:
            key_src = [s for _, s in spec.primary_key]
        order = key_src + [c for c in mapped if c not in key_src]
        columns = [Column(s, mapped.get(s) or _target_pk(spec, s), types[s][1], types[s][2]) for s in order
                   if s in types]
        schema, name = spec.target(t)
        out.append(TablePair(spec.database, t, schema, name, columns, len(key_src)))
    return out


def _target_pk(spec: Any, source: str) -> str:
    for t, s in spec.primary_key:
        if s == source:
            return t
    return source


def connect_source(cfg: Any) -> pymysql.connections.Connection:
    """A source connection with the session time zone at UTC (TIMESTAMPs as stored instants)."""
    from pipeline.source.connect import connect
    from sluice_common.mysqlconn import UTC_SESSION

    return connect(cfg.source, session=(UTC_SESSION,))
