"""Checks on what capture stored: replay Dmls per primary key, order, GTID uniqueness.

``replay(records)`` applies INSERT/UPDATE/DELETE in store order to an in-memory table per
``db.table`` keyed by the primary key and fails on any change that could only come from a
lost or duplicated event (insert of an existing key, update/delete of a missing or
different row). Compare the result with ``source_rows``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pipeline.store.files import BatchStore

Table = dict[tuple, dict[str, Any]]


def all_records(store_dir: str, database: str | None = None) -> list[dict[str, Any]]:
    """Every record of every batch (verified), in store order, optionally for one database."""
    st = BatchStore(store_dir, create=False)
    out = []
    for meta in st.batches():
        out.extend(r for r in st.read(meta) if database is None or r.get("database") == database)
    return out


def replay(records: list[dict[str, Any]]) -> dict[str, Table]:
    tables: dict[str, Table] = defaultdict(dict)
    for r in records:
        if r["isDdl"] or r["type"] not in ("INSERT", "UPDATE", "DELETE"):
            continue
        t = tables[f"{r['database']}.{r['table']}"]
        pk = r["pkNames"]
        for i, row in enumerate(r["data"]):
            key = tuple(row[k] for k in pk)
            if r["type"] == "INSERT":
                assert key not in t, f"duplicate INSERT of {key} (id {r['id']}, {r['logfile']}:{r['logpos']})"
                t[key] = row
            elif r["type"] == "DELETE":
                assert t.get(key) == row, f"DELETE of {key} does not match (id {r['id']})"
                del t[key]
            else:
                before = {**row, **r["old"][i]}
                bkey = tuple(before[k] for k in pk)
                assert t.get(bkey) == before, f"UPDATE of {bkey}: before-image does not match (id {r['id']})"
                del t[bkey]
                t[key] = row
    return tables


def source_rows(conn: Any, database: str, table: str, pk: list[str]) -> Table:
    """The table's current rows as strings, keyed like ``replay``."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{database}`.`{table}`")
        names = [d[0] for d in cur.description]
        out = {}
        for row in cur.fetchall():
            d = {n: (None if v is None else str(v)) for n, v in zip(names, row, strict=True)}
            out[tuple(d[k] for k in pk)] = d
        return out


def check_order_and_gtids(records: list[dict[str, Any]]) -> None:
    """Positions strictly increase in store order; each GTID's records are contiguous."""
    def key(r: dict[str, Any]) -> tuple:
        base, _, num = r["logfile"].rpartition(".")
        return (base, int(num), r["logpos"])
    prev = None
    seen: set[str] = set()
    current = None
    for r in records:
        k = key(r)
        assert prev is None or k > prev, f"record {r['id']} at {k} is not after {prev}"
        prev = k
        g = r.get("gtid")
        if g != current:
            assert g is None or g not in seen, f"GTID {g} appears again after other transactions"
            if current is not None:
                seen.add(current)
            current = g
    ids = [r["id"] for r in records]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), "record ids are not strictly increasing"


def write_config(db: dict[str, Any], tmp_path: Any, include: str, *, max_rows: int = 20000,
                 max_seconds: float = 5.0, resume_by: str = "auto", name: str = "src") -> str:
    """A deployment config for the fixture's server, capturing ``include`` into tmp_path/store."""
    import json

    cfg = {"source": {"name": name, "host": db["host"], "port": int(db["port"]), "user": db["user"],
                      "password": db["password"], "filter": {"include": [include]}, "resumeBy": resume_by,
                      "serverId": 7000 + (abs(hash(str(tmp_path))) % 50000)},
           "store": {"path": str(tmp_path / "store"), "batch": {"maxRows": max_rows, "maxSeconds": max_seconds}}}
    path = tmp_path / "sluice.yml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return str(path)


def mark_start(config_path: str) -> dict[str, Any]:
    """Set the store's start position to the server's current position (before a workload)."""
    from pipeline.capture.server_check import current_position, inspect_server
    from pipeline.config import load_config
    from pipeline.source.connect import connect

    cfg = load_config(config_path)
    st = BatchStore(cfg.store_dir())
    conn = connect(cfg.source)
    try:
        pos = current_position(conn, inspect_server(cfg.source, conn).flavor).to_dict()
    finally:
        conn.close()
    with st.capture_lock():
        st.set_start_position(pos, force=True)
    return pos


def raw_counts(db: dict[str, Any], start: dict[str, Any], end: dict[str, Any], database: str) -> tuple[int, int]:
    """(rows events, rows) of ``database`` between two positions, by plain BinLogStreamReader iteration."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={"host": db["host"], "port": int(db["port"]), "user": db["user"],
                             "passwd": db["password"]},
        server_id=6999, blocking=False, resume_stream=True, log_file=start["logfile"], log_pos=start["logpos"],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[database],
        enable_logging=False)
    events = rows = 0
    end_key = (end["logfile"], end["logpos"])
    try:
        for ev in stream:
            if (stream.log_file, ev.packet.log_pos) > end_key:
                break
            events += 1
            rows += len(ev.rows)
    finally:
        stream.close()
    return events, rows


def capture_both(info: dict[str, Any], tmp_path: Any, database: str, start: dict[str, Any], monkeypatch: Any
                 ) -> list[dict[str, Any]]:
    """Capture ``start``.. with each decoder (native, pure Python: ``SLUICE_CAPTURE_NATIVE``) into its
    own store; both must store the same records (but ``ts``, the capture time), which are returned."""
    from pipeline.capture import run_capture
    from pipeline.config import load_config
    from pipeline.native import load

    stored = {}
    for native in ("1", "0"):
        monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", native)
        if native == "1" and load() is None:
            from tests.support.prereq import missing

            missing("the native extension (sluice_binlog) is not built: scripts/bootstrap builds it")
        (tmp_path / native).mkdir(exist_ok=True)
        cfg = load_config(write_config(info, tmp_path / native, f"{database}\\..*"))
        st = BatchStore(cfg.store_dir())
        with st.capture_lock():
            st.set_start_position(start, force=True)
        run_capture(cfg)
        stored[native] = [{k: v for k, v in r.items() if k != "ts"}
                          for r in all_records(str(cfg.store_dir()), database)]
    assert stored["1"] == stored["0"]
    return stored["1"]



def rotate_with_nothing_after(server: dict[str, Any], db: str, tmp_path: Any, resume_by: str) -> None:
    """The binlog rotates and no transaction follows: capture stores a position past the rotate and
    the new file's header (it was left at the last commit, so ``status`` counted those bytes as not
    captured on an idle source), and resuming from there loses nothing."""
    from pipeline.capture import run_capture
    from pipeline.capture.server_check import master_status
    from pipeline.config import load_config
    from pipeline.ops.status import binlog_behind
    from tests.support import sysbench

    def run(sql: str) -> None:
        with sysbench.connect(server, db) as conn, conn.cursor() as cur:
            cur.execute(sql)

    config = write_config(server, tmp_path, f"{db}\\..*", resume_by=resume_by)
    run("CREATE TABLE rot (id INT PRIMARY KEY, v VARCHAR(20))")
    mark_start(config)
    run("INSERT INTO rot VALUES (1,'a')")
    cfg = load_config(config)
    run_capture(cfg)
    run("FLUSH BINARY LOGS")
    with sysbench.connect(server, None) as conn, conn.cursor() as cur:
        header = master_status(cur)  # the new file, just past its header
    run_capture(load_config(config))
    pos = BatchStore(cfg.store_dir()).last_position()
    # past the rotate and the header (before: left at the last commit in the old file); further on
    # when something else on the server wrote meanwhile (other tests' databases)
    assert pos is not None and pos["logfile"] == header[0] and int(pos["logpos"]) >= int(header[1]), (pos, header)
    assert binlog_behind(pos, (header[0], int(header[1])), []) == 0
    run("INSERT INTO rot VALUES (2,'b')")
    run_capture(load_config(config))
    rows = [(r["type"], row["id"]) for r in all_records(str(cfg.store_dir()), db)
            if r["table"] == "rot" and not r["isDdl"] for row in r["data"]]
    assert rows == [("INSERT", "1"), ("INSERT", "2")]
