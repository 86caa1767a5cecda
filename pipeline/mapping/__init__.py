"""Mapping files in canal's client-adapter format, parsed into frozen, picklable objects.

``load_mapping(path)`` / ``load_mappings(paths_or_globs, base_dir=...)`` return
:class:`Mapping` objects; ``Mapping.spec`` is a :class:`DbMapping`, :class:`EsMapping` or
:class:`HbaseMapping`. Every error is a :class:`~sluice_common.errors.ConfigError` naming the
file and the dotted key. See docs/mappings.md for the keys.
"""

from pipeline.mapping.es import OBJECT_FIELD_TYPES, EsMapping, Relation
from pipeline.mapping.hbase import NATIVE_TYPES, PHOENIX_TYPES, HbaseColumn, HbaseMapping
from pipeline.mapping.loader import load_mapping, load_mappings, parse_mapping_text
from pipeline.mapping.model import Kind, Mapping, parse_mapping
from pipeline.mapping.rdb import DbMapping
from pipeline.mapping.select_sql import (
                                         ColumnRef,
                                         JoinedTable,
                                         JoinKey,
                                         OutputField,
                                         SelectQuery,
                                         TableRef,
                                         parse_select,
)

__all__ = [
    "NATIVE_TYPES", "OBJECT_FIELD_TYPES", "PHOENIX_TYPES", "ColumnRef", "DbMapping", "EsMapping",
    "HbaseColumn", "HbaseMapping", "JoinKey", "JoinedTable", "Kind", "Mapping", "OutputField",
    "Relation", "SelectQuery", "TableRef", "load_mapping", "load_mappings", "parse_mapping",
    "parse_mapping_text", "parse_select",
]
