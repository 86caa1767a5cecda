"""Shared fixtures: the real services, started on demand by scripts/services.

With CI=true a service that cannot be started fails the test run; elsewhere the tests
that need it are skipped with the reason (so a developer can run unit tests alone).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A suite started in the background by a non-interactive shell (`scripts/test ... &`) inherits
# SIGINT ignored, and so would every `sluice` it starts (an ignored signal stays ignored across
# exec): the tests that stop `--follow` with SIGINT then wait in vain and fail. With a handler
# here, the processes the tests start get SIGINT's default again, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
SERVICES_CMD = [sys.executable, str(REPO / "scripts" / "services")]
_failed: dict[str, str] = {}


def _state() -> dict:
    sdir = Path(os.environ.get("SLUICE_SERVICES_DIR", REPO / ".sluice" / "services"))
    f = sdir / "services.json"
    return json.loads(f.read_text()) if f.exists() else {}


def ensure_service(name: str) -> dict:
    """Return the running service's info (ports, version), starting it if needed."""
    if name in _failed:
        _unavailable(name, _failed[name])
    info = _state().get(name)
    if info is None:
        proc = subprocess.run([*SERVICES_CMD, "start", name], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        info = _state().get(name)
        if proc.returncode != 0 or info is None:
            _failed[name] = proc.stdout[-3000:]
            _unavailable(name, _failed[name])
    return info


def _unavailable(name: str, why: str) -> None:
    msg = f"service {name!r} could not be started:\n{why}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def mariadb() -> dict:
    """The source MariaDB: {'host','port','user','password','version',...}."""
    return ensure_service("mariadb")


@pytest.fixture(scope="session")
def mariadb_target() -> dict:
    """A second MariaDB used as a replication target."""
    return ensure_service("mariadb-target")


@pytest.fixture(scope="session")
def mysql() -> dict:
    """The source Oracle MySQL (9.7, GTIDs on): {'host','port','user','password','version','flavor',...}."""
    return ensure_service("mysql")


@pytest.fixture(scope="session")
def mysql_target() -> dict:
    """An Oracle MySQL used as a replication target."""
    return ensure_service("mysql-target")


@pytest.fixture(scope="session")
def postgres() -> dict:
    """The PostgreSQL target."""
    return ensure_service("postgres")


@pytest.fixture(scope="session")
def elasticsearch() -> dict:
    """The Elasticsearch 8.x server."""
    return ensure_service("elasticsearch")


@pytest.fixture(scope="session")
def es(elasticsearch: dict):
    """An elasticsearch-py client of the suite's server."""
    from elasticsearch import Elasticsearch

    client = Elasticsearch(elasticsearch["url"], request_timeout=30)
    yield client
    client.close()


@pytest.fixture(scope="session")
def opensearch() -> dict:
    """The OpenSearch 2.x server (with parent-join, reindex, painless, analysis-common)."""
    return ensure_service("opensearch")


@pytest.fixture(scope="session", params=["elasticsearch", "opensearch"])
def search(request):
    """Each search server in turn (tests/support/search.py): a test that takes this fixture runs
    against Elasticsearch and against OpenSearch, through the adapter's two clients."""
    from tests.support.search import SearchServer

    server = SearchServer.open(request.param, ensure_service(request.param))
    yield server
    server.close()


@pytest.fixture(scope="session")
def hbase() -> dict:
    """HBase standalone + Thrift1 server."""
    return ensure_service("hbase")


@pytest.fixture(scope="session")
def kafka() -> dict:
    """Apache Kafka (KRaft, one node): {'bootstrap', 'port', 'bin' (tool wrappers), ...}."""
    return ensure_service("kafka")


@pytest.fixture(scope="session")
def spark_cluster() -> dict:
    """The Spark standalone master + worker: {'master_url', ...}."""
    return ensure_service("spark")


def pytest_collection_modifyitems(config, items):
    """Mark tests by folder: tests/unit -> unit, tests/integration -> integration, e2e."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts and parts[0] in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))


def pytest_terminal_summary(terminalreporter):
    """Print the fault-injection report (tests/e2e/test_faults.py) at the end of the output."""
    faults = sys.modules.get("tests.support.faults")
    if faults is not None:
        faults.terminal_summary(terminalreporter)


def _drop_running_jvm() -> None:
    """Stop a JVM an earlier module of this pytest process launched (test_job_plan.py does):
    ``spark.jars`` reaches the driver's class path only when the JVM starts, so a session on
    that JVM would not see sluice-spark.jar however it is configured (CI found this: alone,
    test_kafka_parse.py passed)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the JVM exits when its stdin closes (PythonGatewayServer)
        proc.stdin.close()
        proc.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def kafka_spark():
    """A local Spark session in a JVM of its own with Spark's Kafka connector and sluice-spark.jar
    (built by scripts/bootstrap: without it, the job's own paths would not be tested)."""
    from pyspark.sql import SparkSession

    from pipeline.store.kafka.sparkjars import kafka_jars
    from pipeline.store.kafka.values import has_byte_parser, has_range_reader

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _drop_running_jvm()
    s = (SparkSession.builder.master("local[2]").appName("kafka-test")
         .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1").config("spark.sql.session.timeZone", "UTC")
         .config("spark.jars", ",".join(kafka_jars())).getOrCreate())
    if not (has_byte_parser(s) and has_range_reader(s)):
        pytest.fail("sluice-spark.jar is not built (scripts/bootstrap: scripts/svc/sparkjar.py)", pytrace=False)
    yield s
    _drop_running_jvm()  # the next module's session starts its own JVM, without these jars
