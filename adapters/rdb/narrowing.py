"""Target columns that keep fewer fractional digits than their source column: rounding refused.

MariaDB and MySQL round a ``DATETIME(3)`` value into a ``DATETIME`` column, a ``DECIMAL(10,4)``
into a ``DECIMAL(10,2)`` and a ``DECIMAL(10,2)`` into an ``INT``, without an error or a warning even
in strict mode (PostgreSQL rounds too). (A decimal into an integer column used to fail every value,
``3.00`` too, on the integer conversion, with no fix; whole values now pass.) A mapping
into a hand-made target table with a narrower column applied such values rounded, the run ``ok``;
``sluice verify`` then found the rows different and ``sluice repair`` "repaired" them into the same
rounding (a new user's probe). The plan of a change (:func:`adapters.rdb.plan.build_plan`) now puts
a guard (:func:`guard`) on such a column: a value whose digits beyond the target's are all zero
passes (nothing is lost), one that the target would round stops the chunk by name, nothing acked,
with the ``ALTER TABLE`` that widens the column. A change the target cannot hold exactly is not
applied approximately.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import types as sa

from sluice_common.mysqltypes import parse_type

_TEMPORAL = ("datetime", "timestamp", "time")


def lost_digits(family: str, target: sa.TypeEngine, mysql_type: str | None) -> tuple[int, int] | None:
    """``(source digits, target digits)`` when the target keeps fewer fractional digits (of seconds,
    or a decimal's scale) than the source column ``mysql_type``; None when it keeps them all, or the
    columns are of other kinds (a SQLite target keeps the text as given)."""
    t = parse_type(mysql_type)
    if t.base in _TEMPORAL and isinstance(target, (sa.DateTime, sa.Time)):
        want = int(t.args or 0)
        if family == "mysql":
            have = getattr(target, "fsp", None) or 0
        elif family == "postgresql":
            p = getattr(target, "precision", None)
            have = 6 if p is None else p
        else:
            return None
        return (want, have) if have < want else None
    if t.base in ("decimal", "numeric") and isinstance(target, sa.Integer) and family in ("mysql", "postgresql"):
        want = _digits(t.args)[1]  # an integer column keeps no fractional digit, and rounds silently
        return (want, 0) if want else None
    if t.base in ("decimal", "numeric") and isinstance(target, sa.Numeric) and not isinstance(target, sa.Float):
        want = _digits(t.args)[1]
        have = target.scale
        if have is None or family == "sqlite":  # PostgreSQL NUMERIC without a scale keeps any
            return None
        return (want, have) if have < want else None
    return None


def widened_type(family: str, target: sa.TypeEngine, mysql_type: str | None) -> str:
    """The target's own type with the source's digits (for the ALTER TABLE of the refusal's fix)."""
    t = parse_type(mysql_type)
    name = type(target).__name__.upper()
    if t.base in _TEMPORAL:
        digits = int(t.args or 0)
        if family == "postgresql":
            zone = " with time zone" if getattr(target, "timezone", False) else ""
            return f"{'time' if isinstance(target, sa.Time) else 'timestamp'}({digits}){zone}"
        return f"{name}({digits})"
    precision, scale = _digits(t.args)
    src_int = precision - scale
    if isinstance(target, sa.Integer):  # the decimal type that holds both the source's and the column's
        tgt_int, name = _INTEGER_DIGITS.get(name, 20), "DECIMAL"
    else:
        tgt_int = (target.precision or 10) - (target.scale or 0)
    return f"{'numeric' if family == 'postgresql' else name}({min(65, max(src_int, tgt_int) + scale)},{scale})"


#: the decimal digits each integer type holds, unsigned (an unknown one: BIGINT's)
_INTEGER_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "MEDIUMINT": 8, "INTEGER": 10, "INT": 10, "BIGINT": 20}


def _digits(args: str) -> tuple[int, int]:
    """``(precision, scale)`` of a decimal's type arguments (``"10,4"``; MySQL's defaults 10 and 0)."""
    parts = args.split(",")
    return int(parts[0] or 10), int(parts[1]) if len(parts) > 1 and parts[1].strip() else 0


def alter_statement(family: str, table: tuple[str | None, str], column: str, new_type: str, nullable: bool) -> str:
    """``ALTER TABLE`` that gives ``column`` ``new_type``, names quoted (MySQL's MODIFY restates NULL or
    NOT NULL: a TIMESTAMP without NULL may be made NOT NULL and defaulted to now by the server)."""
    q = (lambda n: '"' + n.replace('"', '""') + '"') if family == "postgresql" else \
        (lambda n: "`" + n.replace("`", "``") + "`")
    name = ".".join(q(n) for n in table if n)
    if family == "postgresql":
        return f"ALTER TABLE {name} ALTER COLUMN {q(column)} TYPE {new_type}"
    return f"ALTER TABLE {name} MODIFY {q(column)} {new_type}{' NULL' if nullable else ' NOT NULL'}"


class Rounded(ValueError):
    """A value the target column would round (or otherwise change: :mod:`adapters.rdb.lossy`): a
    ValueError, so that the chunk names its row and column (``adapters/rdb/chunk.py``: a row error,
    dead-lettered where that is on); ``hint`` alters the column."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def guard(keep: int, inner: Callable[[Any], Any] | None, refuse: Callable[[str], Exception]) -> Callable[[Any], Any]:
    """A converter that lets a value through (``inner`` after) when its fractional digits beyond
    ``keep`` are all zero, without them (what the column holds: ``3.00`` into an integer column is
    ``3``), and raises ``refuse(value)`` for one the target would round."""
    def check(v: Any) -> Any:
        if isinstance(v, str):
            dot = v.find(".")
            if dot >= 0:
                if v[dot + 1 + keep:].strip("0"):
                    raise refuse(v)
                v = v[:dot + 1 + keep] if keep else v[:dot]
        return inner(v) if inner is not None else v
    return check
