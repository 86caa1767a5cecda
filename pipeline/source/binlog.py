"""Binlog coordinates: ordering ``file:offset`` positions across files."""

from __future__ import annotations


def binlog_key(logfile: str, logpos: int) -> tuple[str, int, int]:
    """Sortable key of a binlog coordinate (``mysql-bin.000010`` after ``.000009``)."""
    base, _, num = logfile.rpartition(".")
    return (base, int(num) if num.isdigit() else 0, logpos)
