"""Target columns that keep fewer fractional digits than their source column: refused by name.

MariaDB and MySQL round a ``DATETIME(3)`` value into a ``DATETIME`` column, and a ``DECIMAL(10,4)``
into a ``DECIMAL(10,2)``, without an error even in strict mode (PostgreSQL rounds too). A mapping
into a hand-made target table with a narrower column applied every such value rounded, the run
``ok``; ``sluice verify`` then found the rows different and ``sluice repair`` "repaired" them into
the same rounding (a new user's probe). The plan of a change (:func:`adapters.rdb.plan.build_plan`)
refuses such a column instead, naming it and the ``ALTER TABLE`` that widens it: a change the
target cannot hold exactly is not applied approximately.
"""

from __future__ import annotations

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
    if t.base in ("decimal", "numeric") and isinstance(target, sa.Numeric) and not isinstance(target, sa.Float):
        parts = t.args.split(",")
        want = int(parts[1]) if len(parts) > 1 and parts[1].strip() else 0
        have = target.scale
        if have is None or family == "sqlite":  # PostgreSQL NUMERIC without a scale keeps any
            return None
        return (want, have) if have < want else None
    return None


def widened_type(family: str, target: sa.TypeEngine, mysql_type: str | None) -> str:
    """The target type that keeps the source's digits (for the ALTER TABLE of the refusal's fix)."""
    t = parse_type(mysql_type)
    if t.base in _TEMPORAL:
        digits = int(t.args or 0)
        if family == "postgresql":
            zone = " with time zone" if getattr(target, "timezone", False) else ""
            return f"{'time' if t.base == 'time' else 'timestamp'}({digits}){zone}"
        return f"{t.base.upper()}({digits})"
    parts = t.args.split(",")
    scale = int(parts[1]) if len(parts) > 1 and parts[1].strip() else 0
    src_int = int(parts[0] or 10) - scale
    tgt_int = (target.precision or 10) - (target.scale or 0)
    name = "numeric" if family == "postgresql" else "DECIMAL"
    return f"{name}({max(src_int, tgt_int) + scale},{scale})"


def alter_statement(family: str, table: str, column: str, new_type: str, nullable: bool) -> str:
    """``ALTER TABLE`` that gives ``column`` ``new_type`` (MySQL's MODIFY restates NOT NULL)."""
    if family == "postgresql":
        return f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {new_type}"
    return f"ALTER TABLE {table} MODIFY {column} {new_type}{'' if nullable else ' NOT NULL'}"
