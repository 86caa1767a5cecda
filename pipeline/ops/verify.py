"""``sluice verify``: compare sources with their targets, per mapping (docs/operations.md).

The target adapter's capabilities (``compare``) pick the method, and its verifier (``make_verifier``
through adapters/registry.py) compares: ``checksums`` (RDB) completely, chunk by chunk, over the
table pairs :mod:`pipeline.ops.verify_source` resolves (adapters/rdb/verify.py); ``documents``
(Elasticsearch, OpenSearch) and ``rows`` (HBase) by counts and a random sample
(:mod:`pipeline.ops.verify_docs`).
Run it when the targets have caught up (right after a ``sluice run`` with the writers paused,
or accept that rows changed since the last run show as differences); ``--recheck SECONDS`` compares
a table that differs once more after that pause, to tell replication delay from real differences.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.config import Config
from sluice_common import exitcodes
from sluice_common.errors import ConfigError, SluiceError
from sluice_common.logs import get_logger

from .verify_source import TableDiff, connect_source, pairs_for

log = get_logger("verify")


def selected_mappings(cfg: Config, groups: list[str] | None, files: list[str] | None
                      ) -> list[tuple[Any, Any, Any, str]]:
    """``(mapping, kind, target config, group)`` of the chosen groups, restricted to ``files`` if given."""
    from pipeline.job.group import load_group

    base = Path(cfg.file).resolve().parent if cfg.file not in ("", "<config>") else Path.cwd()
    wanted = None
    if files:
        wanted = set()
        for f in files:
            for cand in (Path(f), base / f):
                if cand.exists():
                    wanted.add(cand.resolve())
            if not any(p.exists() for p in (Path(f), base / f)):
                raise ConfigError(f, None, "mapping file not found")
    out = []
    seen = set()
    for g in groups or [g.groupId for g in cfg.groups]:
        plan = load_group(cfg, g)
        for i, m in enumerate(plan.mappings):
            path = Path(m.file)
            path = (path if path.is_absolute() else base / path).resolve()
            if wanted is not None and path not in wanted:
                continue
            key = (str(path), plan.mapping_target[i])
            if key in seen:
                continue
            seen.add(key)
            kind, target = plan.targets[plan.mapping_target[i]]
            out.append((m, kind, target, g))
    if files and not out:
        raise ConfigError(cfg.file, "groups", f"no group of this config uses {', '.join(files)}",
                          hint="give a mapping file listed in a group's mappings")
    return out


def verify(cfg: Config, *, groups: list[str] | None = None, files: list[str] | None = None, chunk: int = 1000,
           sample: int = 200, recheck: float = 0.0) -> list[TableDiff]:
    """Compare every selected mapping; one TableDiff per source table (or ES/HBase mapping)."""
    chosen = selected_mappings(cfg, groups, files)
    if not chosen:
        raise ConfigError(cfg.file, "groups", "nothing to verify: the chosen groups have no mappings")
    from adapters.registry import capabilities

    results: list[TableDiff] = []
    src_conn = connect_source(cfg)
    try:
        for m, kind, target, group in chosen:
            first = len(results)
            try:
                _preflight(cfg, src_conn, m, kind, target)
                if capabilities(kind).compare == "checksums":
                    results += _verify_rdb(src_conn, m, kind, target, chunk, recheck)
                else:  # documents (Elasticsearch, OpenSearch) or rows (HBase): counts and a sample
                    from .verify_docs import verify_sampled

                    results.append(verify_sampled(src_conn, m, kind, target, sample))
            except SluiceError as e:
                msg = e.message + (f"\n  fix: {e.hint}" if e.hint else "")
                results.append(TableDiff(m.file, kind, m.source_key, "?", error=msg,
                                         config_error=e.exit_code == exitcodes.CONFIG))
            except Exception as e:  # noqa: BLE001 - one mapping's failure is reported, the others still run
                log.debug("verify failed", mapping=m.file, exc_info=True)  # the traceback at DEBUG
                results.append(TableDiff(m.file, kind, m.source_key, "?", error=_first_line(e)))
            for d in results[first:]:
                d.group = group
    finally:
        src_conn.close()
    return results


def exit_code(results: list[TableDiff]) -> int:
    """The verify row of the exit-code table: a mapping that does not fit its tables 2, a table
    that could not be compared 1, a difference 5, all equal 0."""
    if any(r.error and r.config_error for r in results):
        return exitcodes.CONFIG
    if any(r.error for r in results):
        return exitcodes.FAILED
    return exitcodes.OK if all(r.ok for r in results) else exitcodes.DIFFERENT


def _preflight(cfg: Config, src_conn: Any, mapping: Any, kind: str, target: Any) -> None:
    """The sync's pre-flight checks, so that a missing table, a bad password or a mapping that
    does not fit reads as that error, not as differing rows."""
    from adapters.registry import make_verifier
    from pipeline.job.group import check_against_source

    check_against_source(cfg, (mapping,), conn=src_conn)
    verifier = make_verifier(kind, target, (mapping,))  # without what check() would create
    try:
        verifier.preflight()
    finally:
        verifier.close()


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:500]}"


def _verify_rdb(src_conn: Any, mapping: Any, kind: str, target: Any, chunk: int, recheck: float
                ) -> list[TableDiff]:
    from adapters.registry import make_verifier

    with src_conn.cursor() as cur:
        pairs = pairs_for(cur, mapping)
    verifier = make_verifier(kind, target, (mapping,))
    raw = verifier.read_connection()
    out = []
    try:
        for pair in pairs:
            tname = f"{pair.target_schema}.{pair.target_table}" if pair.target_schema else pair.target_table
            d = TableDiff(mapping.file, kind, f"{pair.source_db}.{pair.source_table}", f"{tname} on {target.label}")
            try:
                verifier.compare(src_conn, raw, pair, d, chunk)
                if recheck and d.differing:
                    time.sleep(recheck)
                    d2 = TableDiff(d.mapping, d.kind, d.source, d.target)
                    verifier.compare(src_conn, raw, pair, d2, chunk)
                    d2.method += f" (rechecked after {recheck} s)"
                    d = d2
            except Exception as e:  # noqa: BLE001 - e.g. the target table is missing: report, go on
                _rollback(raw)
                d.error = _first_line(e)
            _rollback(raw)  # end the read transaction (PostgreSQL would keep its snapshot)
            out.append(d)
    finally:
        raw.close()
        verifier.close()
    return out


def _rollback(raw: Any) -> None:
    try:
        raw.rollback()
    except Exception:  # noqa: BLE001 - a broken connection: the next statement reports it
        pass
