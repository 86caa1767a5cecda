"""The SYSTEM zone a mirror replays DDL in, as the suite's MariaDB tells it (pipeline/job/zones.py):
its process runs under TZ=Asia/Kolkata (one offset all year, +05:30), its global zone is
America/New_York (scripts/svc/mariadb.py)."""

from __future__ import annotations

import pytest

from adapters.base import DdlChange
from pipeline.config import parse_config
from pipeline.job import zones
from sluice_common.errors import ConfigError

DDL = DdlChange("ALTER", "shop", "t", "ALTER TABLE t ADD c TIMESTAMP NOT NULL DEFAULT '2001-03-25 02:30:00'",
                time_zone="SYSTEM")


def _cfg(info: dict, zone: str | None = None):
    source = {"host": info["host"], "port": info["port"], "user": info["user"], "password": info["password"]}
    if zone is not None:
        source["systemTimeZone"] = zone
    return parse_config({"source": source}, "sluice.yml")


@pytest.fixture(autouse=True)
def _fresh():
    zones._ZONES.clear()  # read once per process: each test asks the server
    yield
    zones._ZONES.clear()


def test_the_sources_system_zone_is_read_from_it(mariadb):
    assert zones.ddl_time_zone(_cfg(mariadb), DDL) == "+05:30"
    assert zones.ddl_time_zone(_cfg(mariadb), DdlChange("ALTER", "shop", "t", "x")) == "America/New_York"


def test_a_named_system_zone_is_checked_against_the_source(mariadb):
    assert zones.ddl_time_zone(_cfg(mariadb, "Asia/Kolkata"), DDL) == "Asia/Kolkata"
    with pytest.raises(ConfigError) as e:
        zones.ddl_time_zone(_cfg(mariadb, "Europe/Berlin"), DDL)
    assert e.value.key == "source.systemTimeZone" and "UTC+05:30" in str(e.value)
