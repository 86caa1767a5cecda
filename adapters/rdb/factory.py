"""The RDB adapter's entry points, with the signatures every adapter's factory.py has
(adapters/README.md): the target of an ``outerAdapters`` entry, a writer, a verifier, the partition
rules."""

from __future__ import annotations

from typing import Any

from adapters.base import Capabilities
from adapters.rdb.config import RdbTarget
from adapters.rdb.verify import RdbVerifier
from adapters.rdb.writer import RdbWriter

#: the writer tracks lineage and the applied source position (``_sluice_progress``, the DDL ledger,
#: ``_sluice_applied``), replays DDL with the source's charsets, checks the foreign keys the source
#: cascades with and (MySQL/MariaDB targets) that no key compares more coarsely than the source, folds each
#: key's changes within a chunk; verify and repair compare every row by chunked checksums
CAPABILITIES = Capabilities(lineage=True, positions=True, source_charsets=True, foreign_keys=True,
                            key_collations=True, folds=True, compare="checksums")

def make_writer(target: RdbTarget, mappings: tuple[Any, ...]) -> RdbWriter:
    """A new, unopened writer for ``target`` applying ``mappings`` (RdbTable or dbMapping Mappings)."""
    return RdbWriter(target, tuple(mappings))


def make_verifier(target: RdbTarget, mappings: tuple[Any, ...]) -> RdbVerifier:
    """What ``sluice verify``/``repair`` ask of ``target``: its read connection and the chunked
    checksum compare of a table pair (adapters/rdb/verify.py)."""
    return RdbVerifier(target, tuple(mappings))


def target_from_adapter(adapter: Any, file: str, key: str, cfg: Any = None) -> RdbTarget:
    """The target of one ``outerAdapters`` entry (``name: rdb``); errors name ``file``/``key``
    (``cfg``, the deployment: whether its changes come from a canal-written topic, whose row types
    list only the columns of each image)."""
    from dataclasses import replace

    props = dict(getattr(adapter, "properties", None) or {})
    target = RdbTarget.from_properties(props, file, key)
    if getattr(adapter, "key", None) and not target.key:
        target = replace(target, key=adapter.key)
    store = getattr(cfg, "store", None)
    kafka = getattr(store, "kafka", None)
    if getattr(store, "kind", None) == "kafka" and getattr(kafka, "writtenBy", "sluice") == "canal":
        target = replace(target, complete_types=False)
    return target


def key_rules(target: RdbTarget, target_id: str, mappings: list[tuple[int, Any]]):
    """How the job partitions these mappings' changes (:func:`adapters.rdb.keys.key_rules`), read
    from the target's schema on the driver."""
    from sqlalchemy.exc import SQLAlchemyError

    from adapters.rdb import keys
    from adapters.rdb.client import engine_for
    from adapters.rdb.dialects import dialect_of
    from adapters.rdb.errors import classify

    try:
        with engine_for(target).connect() as conn:
            return keys.key_rules(conn, target, target_id, dialect_of(target).family, mappings)
    except SQLAlchemyError as e:
        raise classify(e, target, table="(schema)", action="read the keys and foreign keys of") from None
