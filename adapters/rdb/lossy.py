"""Target columns of another kind that cannot hold every value of their source column: a value
they would change is refused by name.

A new user's probe mapped source columns into hand-made target columns of other types and every
run was ``ok`` while the target held other values: a ``DATETIME`` into a ``date`` (the time of day
dropped), a ``DOUBLE`` into a ``real`` (``1.0000000000000002`` became ``1``), a ``FLOAT`` into
``numeric(10,2)`` (``0.125`` became ``0.13``), a ``BIGINT`` into a ``double precision``
(``9007199254740993`` became ``...992``), a ``VARCHAR`` into a ``char(10)`` (trailing spaces gone:
a fixed-width column pads and strips them), a MariaDB ``JSON`` into a ``jsonb`` (``{"a":1,"a":2}``
reads 1 at the source, 2 there). ``sluice verify`` then found the rows different and
``sluice repair`` "repaired" them into the same loss, over and over.

:func:`loss` says, for one (target column type, source ``mysqlType``), how such a column changes a
value, or None when it holds every value (or this module does not know the pair: the fractional
digits of temporal and decimal columns are :mod:`adapters.rdb.narrowing`'s). The plan
(:func:`adapters.rdb.plan.build_plan`) guards the column with it: a value the column would hold
unchanged passes, any other is a row error naming the row, the value, both columns, what would be
lost, and the ``ALTER TABLE`` that gives the column the type Sluice suggests for the source's
(:func:`adapters.rdb.values.suggest_type`). MySQL/MariaDB and PostgreSQL targets; mirrors are not
guarded (their columns follow the source's replayed DDL).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext

from sqlalchemy import types as sa
from sqlalchemy.dialects import mysql as my
from sqlalchemy.dialects import postgresql as pg

from sluice_common.mysqltypes import INTEGER_BYTES, parse_type

_F32 = struct.Struct("<f")
_TEXT = frozenset({"varchar", "text", "tinytext", "mediumtext", "longtext"})


@dataclass(frozen=True)
class Loss:
    """How a target column changes some values of its source column."""

    changes: Callable[[str], bool]   # True: the column would not hold this (non-NULL) text as it is
    what: str                        # what would be lost, for the refusal
    text: bool = False               # a text column (its collation goes with the fix's type)
    #: the type the fix gives the column, where the suggested type for the source's
    #: (:func:`adapters.rdb.values.suggest_type`) would not do: is that type, or cannot be indexed
    fix: str | None = None


def loss(family: str, target: sa.TypeEngine, mysql_type: str | None) -> Loss | None:
    """See the module docstring."""
    if family not in ("mysql", "postgresql") or not mysql_type:
        return None
    base = parse_type(mysql_type).base
    if base in ("datetime", "timestamp") and isinstance(target, sa.Date):
        return Loss(_has_time, "its time of day would be dropped")
    if (base == "json" or base in _TEXT) and isinstance(target, pg.JSONB):  # MariaDB's JSON is a longtext
        return Loss(lambda v: _duplicate_keys(v) or _nul(v), "the column keeps only the last of an object's "
                    "duplicate keys (the source's text has each; MariaDB's JSON functions read the first) and cannot "
                    "hold \\u0000", fix="json")
    if (base == "json" or base in _TEXT) and isinstance(target, my.JSON):
        return Loss(_duplicate_keys, "the column keeps only the last of an object's duplicate keys (the source's text "
                    "has each; MariaDB's JSON functions read the first)", fix="longtext")
    if base in _TEXT and isinstance(target, sa.CHAR):
        # a MySQL TEXT cannot be a key without a prefix length (error 1170); the values fit the CHAR's length
        fix = f"varchar({target.length})" if family == "mysql" and base != "varchar" and target.length else None
        return Loss(lambda v: v.endswith(" "), "a fixed-width column pads and strips trailing spaces", text=True,
                    fix=fix)
    if _is_float32(target):
        if base == "double" or base in INTEGER_BYTES or base in ("decimal", "numeric"):
            return Loss(_not_float32, "it would be rounded to a 4-byte float")
        return None
    if isinstance(target, sa.Float):
        if base in INTEGER_BYTES or base in ("decimal", "numeric"):
            return Loss(_not_double, "it would be rounded to an 8-byte float")
        return None
    if base in ("float", "double", "real") and isinstance(target, sa.Numeric) and target.scale is not None:
        scale = target.scale
        return Loss(lambda v: _beyond_scale(v, scale), f"it has more than the column's {scale} decimal places")
    return None


def _is_float32(target: sa.TypeEngine) -> bool:
    return isinstance(target, pg.REAL) or type(target) is my.FLOAT and (target.precision or 0) <= 24


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate
    return out


def _duplicate_keys(v: str) -> bool:
    """An object of the JSON text names a key twice (MariaDB keeps the text as written; a MySQL 8
    source's JSON never does)."""
    if v.count('"') < 4:
        return False
    try:
        json.loads(v, object_pairs_hook=_no_duplicates)
    except _Duplicate:
        return True
    except ValueError:  # not JSON: the column refuses it
        return False
    return False


def _nul(v: str) -> bool:
    """A string of the JSON text holds U+0000 (``jsonb`` refuses it; ``json`` keeps the text)."""
    if "\\u0000" not in v:
        return False
    try:
        return _holds_nul(json.loads(v))
    except ValueError:
        return False


def _holds_nul(x: object) -> bool:
    if isinstance(x, str):
        return "\x00" in x
    if isinstance(x, dict):
        return any("\x00" in k or _holds_nul(y) for k, y in x.items())
    if isinstance(x, list):
        return any(_holds_nul(y) for y in x)
    return False


def _has_time(v: str) -> bool:
    _, _, clock = v.partition(" ")
    return bool(clock.strip("0:. "))


def _double(v: str) -> float | None:
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _not_double(v: str) -> bool:
    """The double nearest ``v`` is another number: an integer it does not hold exactly
    (``9007199254740993``; ``-9223372036854775808`` it does), a decimal whose nearest double's
    shortest text is another number (one of more than 15-17 significant digits; ``0.1`` reads back
    as ``0.1``)."""
    x = _double(v)
    if x is None:
        return False
    n = _integer(v)
    if n is not None:
        return x != n
    return Decimal(repr(x)) != _dec(v)


def _not_float32(v: str) -> bool:
    """The 4-byte float nearest ``v`` is another number than ``v`` itself (as :func:`_not_double`
    says of the double)."""
    x = _double(v)
    if x is None:
        return False
    if _not_double(v):
        return True
    try:
        return _F32.unpack(_F32.pack(x))[0] != x
    except OverflowError:
        return True


def _integer(v: str) -> int | None:
    try:
        return int(v)
    except ValueError:
        return None


def _beyond_scale(v: str, scale: int) -> bool:
    d = _dec(v)
    if d is None or not d.is_finite():
        return False
    with localcontext() as ctx:
        ctx.prec = 200  # exact for any value a column holds; wider ones the target refuses itself
        try:
            return d != d.quantize(Decimal(1).scaleb(-scale))
        except InvalidOperation:
            return False


def _dec(v: str) -> Decimal | None:
    """``v`` as an exact Decimal (no context rounding), or None."""
    try:
        return Decimal(v)
    except (InvalidOperation, ValueError):
        return None
