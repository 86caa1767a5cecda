"""The contract every target adapter implements, and the records that cross it.

An adapter is one subpackage (``adapters/<name>/``) with the same file set, described once
in adapters/README.md: ``factory.py`` (the entry points, one signature for every adapter),
``config.py`` (frozen, picklable target settings), ``client.py`` (connection/pool),
``plan.py`` (per-table plan), ``writer.py`` (the :class:`Writer`'s life cycle), ``chunk.py``
(applying a chunk), ``errors.py`` (the one place where driver exceptions become Sluice's
transient/terminal errors), ``values.py`` (Dml strings -> target values) and ``verify.py``
(counts, read-back and compare for ``sluice verify``). ``adapters/opensearch`` is the one
exception by design: it is the es adapter with another client (config, client, factory,
errors only; adapters/es/api.py). Writers are created on the executor from plain config (never shipped
open), in the same split as PySpark's ``DataSourceWriter``: ``write`` on executors,
commit/abort on the driver.

Life cycle on an executor, per partition::

    w = make_writer(target, mappings); w.open()
    for chunk in chunks(changes, commitBatch):   # changes already in source order per key
        w.apply(mapping, chunk); w.commit()      # or w.rollback() and stop on error
    w.close()

The pipeline drives this life cycle in one place, ``pipeline/writers.py`` (sync, its DDL replay,
full loads, dead-letter replay, repair).
"""

from __future__ import annotations

import abc
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

#: ``UPSERT`` never comes from the binlog: full loads (``sluice etl``/``bootstrap``) send it to
#: mean "insert the row, or overwrite the row with the same target key" -- RDB: delete-by-key +
#: insert (MySQL/MariaDB) or ``ON CONFLICT (pk) DO UPDATE`` (PostgreSQL/SQLite); ES and HBase:
#: the same as INSERT, which already overwrites (``index`` by ``_id``; a put of every cell,
#: NULLs deleting theirs).
ChangeKind = Literal["INSERT", "UPDATE", "DELETE", "TRUNCATE", "UPSERT"]


class Change(NamedTuple):
    """One single-row change, as the job hands it to an adapter.

    ``data`` is the after-image (for DELETE the before-image); values are the Dml strings
    (or None). ``old`` holds, for UPDATE, the before-values of the changed columns only.
    A primary-key-changing UPDATE never reaches an adapter: the job turns it into a DELETE
    of the old key and an INSERT of the new row. ``seq`` = (batchId, event seq, row index).
    An executor builds one per row, so it is a named tuple (immutable, built at C speed);
    its dicts are shared and never modified.
    """

    kind: ChangeKind
    database: str
    table: str
    data: dict[str, str | None]
    old: dict[str, str | None] | None = None
    pk_names: tuple[str, ...] = ()
    mysql_type: dict[str, str] = {}  # noqa: RUF012 - shared, never modified
    seq: tuple[int, int, int] = (0, 0, 0)
    ordered: bool = False
    #: False when the source applied the row with foreign key checks off (its rows event's
    #: NO_FOREIGN_KEY_CHECKS flag: a session with ``foreign_key_checks=0``, or a cascaded row that
    #: MySQL 9 logs ahead of the parent row that caused it); the target applies it the same way
    fk_checks: bool = True


@dataclass(frozen=True, slots=True)
class DdlChange:
    """A DDL statement from the binlog (applied on the driver, between DML segments)."""

    kind: str  # CREATE | ALTER | ERASE | RENAME | TRUNCATE | CINDEX | DINDEX | QUERY
    database: str
    table: str
    sql: str
    seq: tuple[int, int, int] = (0, 0, 0)
    es: int = 0  # the source's event time (ms since the epoch; 0: unknown)
    #: ``CREATE TABLE t LIKE other.s`` naming a database outside the mirror: ``(definition, "")`` when
    #: the source's ``SHOW CREATE TABLE other.s`` is provably the one the statement copied, else
    #: ``("", why not)``; None when not looked up (adapters/rdb/like.py, pipeline/job/definitions.py)
    like: tuple[str, str] | None = None
    #: the time zone to replay the statement in (its session's, from the binlog, else the source's
    #: global one): TIMESTAMP literals in DDL depend on it
    time_zone: str = ""
    #: the binlog event's session was read whole (capture's ``sessionRead``): an empty ``time_zone``
    #: then means the statement used none; False (also for stores written before it was recorded):
    #: unknown whether it did
    zone_read: bool = False
    #: the microseconds of the statement's start (``es`` holds the seconds), when the binlog has them:
    #: a replay runs at the source's time (``SET timestamp``), so ``ADD COLUMN ... DEFAULT
    #: CURRENT_TIMESTAMP(6)`` fills the existing rows as the source did
    usec: int | None = None


@dataclass(frozen=True)
class AppliedFrom:
    """Where a sync round starts in the source's binlog, for a target to record with the rows it
    commits (adapters/rdb/applied.py): everything before ``position`` was applied by every partition
    of ``group``. Plain picklable data, shipped to the executors in the job's context."""

    source: str  # the config's source.name
    server: str  # its host:port, for messages
    group: str
    position: str  # JSON of the round's start position (logfile, logpos, gtid, ...)
    store_id: str
    batch: int  # the round's first batch


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an adapter does beyond the :class:`Writer` contract, declared once by its factory.py
    (``CAPABILITIES``) and read through :func:`adapters.registry.capabilities`: the pipeline asks
    this record, never the writer (``hasattr``) nor the adapter's name, so a new adapter says what
    it can do in one place (adapters/README.md)."""

    #: ``Writer.track(scope, generation=0, recaptures=())``: the writer records what it applied under
    #: the store id + group (ordered tables' positions, the DDL ledger), so a replay skips what the
    #: target already holds; the sync and the DDL replay call it before ``open``
    lineage: bool = False
    #: ``Writer.track_position(applied_from, part)``: the round's start in the source's binlog is
    #: recorded with the committed rows; ``Writer.recorded_positions(source)`` reads it back (a new
    #: store asks the targets where they stand) and ``Writer.record_position(mark)`` writes it on its
    #: own (``sluice bootstrap``), pipeline/job/positions.py
    positions: bool = False
    #: replayed DDL reads the source's charset defaults through ``Writer.source_charsets`` and the
    #: zone to run a statement in through ``Writer.ddl_time_zone`` (callables the driver sets before
    #: ``open``; DDL replayed as the source understood it)
    source_charsets: bool = False
    #: the target holds foreign keys: ``Writer.check(cascades)`` takes the source's cascading foreign
    #: keys (in the target's names) that the target must have, because the binlog does not carry the
    #: rows they change; a target without them is warned about mapped tables the source cascades into
    foreign_keys: bool = False
    #: ``Writer.check_key_collations(source)``: pre-flight, no key of a mapped target table compares
    #: more coarsely than the source column it holds (the source's side asked of ``source``, a
    #: :class:`SourceCollations`); the job calls it when the source answered its own checks
    key_collations: bool = False
    #: how ``sluice verify`` and ``sluice repair`` compare it with the source: ``checksums`` (every row,
    #: chunked checksums over a DB-API connection, adapters/rdb/verify.py), ``documents`` (counts and
    #: a sample of documents by ``_id``) or ``rows`` (counts and a sample of rows by row key)
    compare: Literal["checksums", "documents", "rows"] = "rows"
    #: the writer folds each key's changes within a chunk (adapters/rdb/fold.py) for tables whose rows
    #: need only per-key order (hash-partitioned, every key column compared exactly): the job then
    #: delivers such a table's changes grouped by key within a partition (each key's in source
    #: order), so a chunk holds a key's whole run of changes instead of scattered pieces
    folds: bool = False


class SourceCollations(Protocol):
    """The source's side of ``Writer.check_key_collations`` (``Capabilities.key_collations``), handed
    by the job (pipeline/job/collations.py): what the source's catalog and server say."""

    def tables(self, database: str) -> list[str]:
        """The base tables of a source database."""

    def column_collations(self, database: str, table: str) -> list[tuple[str, str | None, str | None]]:
        """``(column, charset, collation)`` of each column of a source table (None: not text)."""

    def equal_pairs(self, charset: str, collation: str) -> frozenset[tuple[int, int]]:
        """What ``collation`` equates on the source (:func:`sluice_common.collations.equal_pairs`)."""


@dataclass
class ApplyStats:
    """What a writer did; picklable, summed by the driver. Keys are ``db.table`` (``lacked``: see there)."""

    inserted: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    deleted: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)  # duplicate-key skips (replays)
    dead_lettered: Counter = field(default_factory=Counter)
    #: UPDATEs and DELETEs that matched no target row (canal applies them as no-ops too; counted
    #: so that a target missing rows, or source rows sharing a key, shows in the summary)
    missed: Counter = field(default_factory=Counter)
    #: changes folded into a later change of the same row within a chunk (adapters/rdb/fold.py): not
    #: applied on their own, the row ends as applying them would have left it
    folded: Counter = field(default_factory=Counter)
    #: mapped source columns a change's table did not have when the change was written (a column
    #: added or renamed at the source since, a mapping edited to name it while older changes were
    #: pending): :func:`lacked_key` -> the plans used for such changes. Applied without those
    #: columns, so the sync names the repair (pipeline/job/mapped.py)
    lacked: Counter = field(default_factory=Counter)

    KINDS = ("inserted", "updated", "deleted", "skipped", "dead_lettered", "missed", "folded")  # rows
    NOTES = ("lacked",)

    def add(self, other: ApplyStats) -> ApplyStats:
        for name in self.KINDS + self.NOTES:
            getattr(self, name).update(getattr(other, name))
        return self

    def total(self) -> int:
        return sum(sum(getattr(self, n).values()) for n in ("inserted", "updated", "deleted", "skipped"))

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {n: dict(getattr(self, n)) for n in self.KINDS + self.NOTES}


def lacked_key(origin: str, source: str, pairs: tuple[tuple[str, str], ...]) -> str:
    """The key of :attr:`ApplyStats.lacked`: mapping file, ``db.table`` and (source, target) columns,
    as JSON (names may hold any character)."""
    return json.dumps([origin, source, [list(p) for p in pairs]], ensure_ascii=False)


@dataclass
class SampleCheck:
    """What an adapter's verify.py found for one mapping whose target holds documents/rows built
    from the source (counts on both sides, a sample compared); ``sluice verify`` reports it."""

    source: str = ""  # the source table (or query) compared
    source_rows: int = 0
    target_rows: int = 0
    sampled: int = 0
    missing: list = field(default_factory=list)  # sampled keys the target lacks
    changed: list = field(default_factory=list)  # sampled keys the target holds differently
    #: said when the counts differ but the sample matched
    count_note: str = ""


@dataclass
class Column:
    """One compared column of a :class:`TablePair`: its source and target names, source types."""

    source: str
    target: str
    data_type: str
    column_type: str


@dataclass
class TablePair:
    """One source table and its RDB target table, with the compared columns and the key (resolved
    from a dbMapping and the source's catalog by the caller; compared by the RDB verifier)."""

    source_db: str
    source_table: str
    target_schema: str | None
    target_table: str
    columns: list[Column]             # every compared column, key columns first
    nkey: int                         # how many of ``columns`` form the key (0: no key)


class Writer(abc.ABC):
    """One open connection to one target, applying the changes of its mappings."""

    def __init__(self, target: Any, mappings: tuple[Any, ...]):
        self.target = target
        self.mappings = mappings
        self.stats = ApplyStats()

    @abc.abstractmethod
    def check(self) -> None:
        """Pre-flight on the driver: connect, and check every mapping's target exists and
        fits (raise ConfigError/TargetError with one actionable message)."""

    @abc.abstractmethod
    def open(self) -> None:
        """Connect (pooled per executor process) and begin."""

    @abc.abstractmethod
    def apply(self, mapping: Any, changes: list[Change]) -> None:
        """Apply changes of one mapping in the given order, inside the open transaction.
        Raise TransientError (worth a retry of the chunk) or TargetError (terminal)."""

    def apply_ddl(self, mapping: Any, ddl: DdlChange) -> None:  # noqa: B027 - optional hook
        """Apply or react to a DDL (driver side). Default: nothing to do."""

    @abc.abstractmethod
    def commit(self) -> None:
        """Make the applied chunk durable."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Discard the current chunk."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection."""


class Verifier:
    """What ``sluice verify`` and ``sluice repair`` ask of one target (factory ``make_verifier``).
    Which methods an adapter has follows its ``Capabilities.compare``; the others raise.

    * ``checksums``: :meth:`read_connection`, :meth:`compare` (a :class:`TablePair`, every row);
    * ``documents`` and ``rows``: :meth:`describe`, :meth:`source_table`, :meth:`check_sample`
      (counts and a sample), :meth:`differing` (a key range, for repair).
    """

    def __init__(self, target: Any, mappings: tuple[Any, ...]):
        self.target = target
        self.mappings = mappings

    def _unsupported(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__} has no {what} (see its Capabilities.compare)")

    def read_connection(self) -> Any:
        """A DB-API connection to the target (the caller closes it)."""
        raise self._unsupported("read_connection")

    def compare(self, source: Any, target_conn: Any, pair: TablePair, diff: Any, chunk: int) -> Any:
        """Compare ``pair`` chunk by chunk between the DB-API connections ``source`` and
        ``target_conn``, filling the counts, chunks and keys of the report record ``diff``."""
        raise self._unsupported("compare")

    def absent(self, pairs: list[TablePair]) -> list[TablePair]:
        """``checksums``: the pairs whose target table does not exist (a repair can fill a table, not
        make one: it names them instead of failing on each of their key ranges)."""
        raise self._unsupported("absent")

    def describe(self, mapping: Any) -> tuple[str, str]:
        """``(source table, target)`` of a mapping, as verify names them."""
        raise self._unsupported("describe")

    def source_table(self, mapping: Any) -> tuple[str | None, str]:
        """``(database or None, table)`` of the source table a mapping's documents/rows are keyed by."""
        raise self._unsupported("source_table")

    def check_sample(self, mapping: Any, sample: int, read_source: Any) -> SampleCheck:
        """Counts on both sides and ``sample`` documents/rows compared; ``read_source()`` gives
        ``(source rows, sampled source rows as INSERT changes)`` to an adapter that needs them."""
        raise self._unsupported("check_sample")

    def differing(self, mapping: Any, database: str, key_names: list[str], read_keys: Any,
                  read_changes: Any) -> int:
        """How many source rows of a key range the target holds differently (0 when the range has
        none); the source read through ``read_keys()`` (their ``key_names`` values) or
        ``read_changes()`` (the rows as INSERT changes), read anew on each call."""
        raise self._unsupported("differing")

    def preflight(self) -> None:
        """The writer's pre-flight (``Writer.check``) for verify and repair, so that a missing table, a
        bad password or a mapping that does not fit reads as that error, not as differing rows; what
        the check would change on the target (a table an hbaseMapping's ``autoCreateTable`` creates)
        is left out: the compare reports it missing."""
        raise self._unsupported("preflight")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the verifier holds open."""
