"""Paths with spaces, non-ASCII letters and glob characters, in every path Sluice hands on, through
the real CLI against the real MariaDB source and target (issue 37): the config's folder (mapping
globs, the store Spark reads, the dead-letter store, the metrics and the run log), the JVM's
class-data-sharing archive in the driver's Java options, the report, and ``sluice package``'s
printed command. A store in ``dir with spaces`` broke every sync with 90 lines of Java stack
(``dir%20with%20spaces/...jsonl does not exist``)."""

from __future__ import annotations

import shlex

from pipeline.job.jvm import archive_key
from tests.support.cli import cli
from tests.support.operator import make, t_mapping

FOLDER = "dir with spaces ü [x]"


def test_a_deployment_in_a_folder_with_spaces_and_non_ascii_letters(tmp_path, mariadb, mariadb_target):
    d = make(tmp_path, mariadb, mariadb_target, folder=FOLDER)
    d.add_mapping("t.yml", {**t_mapping(d.db), "deadLetter": True})
    d.target(f"ALTER TABLE `{d.tdb}`.t MODIFY b VARCHAR(3)")  # one row will not fit: a dead letter
    raw = d.config()
    raw["metrics"] = {"textfile": "metrics ü/sluice.prom", "json": "metrics ü/sluice.json"}
    d.write_config(raw)
    cds = tmp_path / "cds dir ü"  # the driver's archive, as `sluice jvm options` names it
    cds.mkdir()
    (cds / f"spark-{archive_key()}.jsa").write_bytes(b"not an archive: the JVM maps none, but must start")
    env = {"SLUICE_CDS_DIR": str(cds)}
    opts = cli("jvm", "options", env=env).stdout.strip()
    assert f"-XX:SharedArchiveFile={cds}/spark-" in shlex.split(opts)[0]
    d.source(f"INSERT INTO `{d.db}`.t VALUES (1, 'ok'), (2, 'too long')")

    proc = d.run("run", env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "does not exist" not in out and "Exception" not in out and "%20" not in out, out[-5000:]
    assert f"dead-lettered 1 rows of {d.db}.t (mappings/t.yml)" in proc.stdout
    assert d.rows() == [(1, "ok")]
    listed = d.ok("deadletter", "list", "--group", "g1").stdout
    assert "{id='2'}" in listed and "Data too long" in listed
    assert (d.root / "metrics ü" / "sluice.prom").is_file() and (d.store / "runs.jsonl").is_file()

    report = d.root / "report ü" / "runs ü.html"
    report.parent.mkdir()
    proc = d.ok("report", "--out", str(report))
    assert str(report) in proc.stdout and "run" in report.read_text()
    assert d.ok("status").returncode == 0

    dist = d.root / "dist ü"
    printed = cli("package", "--out", str(dist)).stdout
    words = shlex.split(printed.split("run:", 1)[1])  # the printed command runs as printed
    assert words[words.index("--py-files") + 1].startswith(str(dist / "sluice-"))
    assert str(dist / "sluice_submit.py") in words
