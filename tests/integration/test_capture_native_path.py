"""The native decoder and the pure-Python one store the same records for the same binlog range.

``SLUICE_CAPTURE_NATIVE=0`` runs capture on the pure-Python decoder (``pipeline/capture/decoder.py``,
the fallback where the extension is not built); by default the native one runs. Both feed the
same transaction framer.
Over every type and edge value (the type test's table), DDL, UPDATEs and DELETEs, and a
sysbench workload with a split transaction, both stores must hold identical records apart
from capture time; and a table with a column only Python decodes (here: a ``gbk`` column)
goes through the native stream's raw-rows path with the same result.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from pipeline.capture import native, run_capture
from pipeline.config import load_config
from pipeline.store.files import BatchStore
from tests.integration.test_capture_types import DDL, ROWS
from tests.support import source_faults as sf
from tests.support import sysbench
from tests.support.capture_check import all_records, mark_start, write_config
from tests.support.prereq import missing

if native.load() is None:
    missing("the native capture extension is not built (scripts/bootstrap)", module=True)


def _capture(config: str, start: dict, tmp: Path, name: str, monkeypatch, native_on: bool) -> list[dict]:
    cfg = json.loads(Path(config).read_text())
    cfg["store"]["path"] = str(tmp / name)
    path = tmp / f"{name}.yml"
    path.write_text(json.dumps(cfg))
    loaded = load_config(path)
    store = BatchStore(loaded.store_dir())
    with store.capture_lock():
        store.set_start_position(start)
    monkeypatch.setenv("SLUICE_CAPTURE_NATIVE", "1" if native_on else "0")
    run_capture(loaded)
    return all_records(str(loaded.store_dir()))


def test_native_and_python_decoders_store_the_same_records(mariadb, tmp_path, monkeypatch):
    database = f"cap_paths_{uuid.uuid4().hex[:8]}"
    config = write_config(mariadb, tmp_path, f"{database}\\..*", max_rows=150)
    sysbench.create_database(mariadb, database)
    start = mark_start(config)
    try:
        with sysbench.connect(mariadb, database) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode='NO_ENGINE_SUBSTITUTION'")
            cur.execute("SET SESSION time_zone='America/New_York'")
            cur.execute(DDL.format(db=database))
            for row in ROWS:
                cur.execute(f"INSERT INTO types VALUES {row}")
            cur.execute("UPDATE types SET vc='changed', bu=bu-1, en='b', dtm6=NULL WHERE id=1")
            cur.execute("UPDATE types SET id=20 WHERE id=2")
            cur.execute("DELETE FROM types WHERE id=3")
            cur.execute("CREATE TABLE g (id INT PRIMARY KEY, t VARCHAR(20) CHARACTER SET gbk, n INT)")
            cur.execute("INSERT INTO g VALUES (1, '中文', 1), (2, NULL, 2)")
            cur.execute("UPDATE g SET t = '汉字', n = 3 WHERE id = 1")
            cur.execute("ALTER TABLE g ADD COLUMN extra DECIMAL(8,3) DEFAULT 1.5")
            cur.execute("INSERT INTO g VALUES (3, 'x', 3, 2.25)")
        sysbench.prepare(mariadb, database, tables=2, table_size=400, create=False)
        sysbench.run(mariadb, database, seconds=2, threads=2, tables=2, table_size=400)
        fast = _capture(config, start, tmp_path, "native", monkeypatch, True)
        slow = _capture(config, start, tmp_path, "python", monkeypatch, False)
    finally:
        sysbench.drop_database(mariadb, database)
    assert len(fast) > 100
    assert sf.comparable(fast) == sf.comparable(slow)
    gbk = [r for r in fast if r["table"] == "g" and not r["isDdl"]]
    assert gbk[0]["data"] == [{"id": "1", "t": "中文", "n": "1"}, {"id": "2", "t": None, "n": "2"}]
    assert gbk[1]["old"] == [{"t": "中文", "n": "1"}]
