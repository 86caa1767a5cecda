"""Which zone a mirror replays a DDL statement in when the binlog says it ran in ``SYSTEM``
(pipeline/job/zones.py): an exact zone or a refusal naming ``source.systemTimeZone``, never a guess."""

from __future__ import annotations

import pytest

from adapters.base import DdlChange
from pipeline.config import parse_config
from pipeline.job.zones import ddl_time_zone, offset_text, probes, system_zone, zone_offsets
from sluice_common.errors import ConfigError, SourceError

DDL = DdlChange("ALTER", "shop", "t", "ALTER TABLE t ADD c TIMESTAMP NOT NULL DEFAULT '2001-03-25 02:30:00'",
                time_zone="SYSTEM")


def _cfg(zone: str | None = None, port: int = 1):
    source = {"host": "127.0.0.1", "port": port, "connectTimeout": 2}  # port 1: nothing listens
    if zone is not None:
        source["systemTimeZone"] = zone
    return parse_config({"source": source}, "sluice.yml")


def _offsets(name: str) -> tuple[int, ...]:
    """What a source whose host runs in ``name`` answers at each probe."""
    return zone_offsets(name, probes())


def test_offsets_and_probes():
    at = probes()
    assert at[0].year == 1971 and at[-1].month == 12 and len(at) % 12 == 0
    assert set(_offsets("Europe/Berlin")) == {3600, 7200} and set(_offsets("Asia/Kolkata")) == {19800}
    assert offset_text(19800) == "+05:30" and offset_text(-12600) == "-03:30" and offset_text(-1800) == "-00:30"


def test_a_system_zone_with_one_offset_since_1971_is_that_offset():
    assert system_zone(_cfg(), DDL, _offsets("Asia/Kolkata")) == "+05:30"
    assert system_zone(_cfg(), DDL, _offsets("Etc/GMT+3")) == "-03:00"


@pytest.mark.parametrize("host_zone", ["Europe/Berlin", "Europe/London", "Pacific/Apia", "Africa/Casablanca"])
def test_a_system_zone_whose_offset_changes_is_refused_naming_the_statement_and_the_setting(host_zone):
    """Daylight saving time, or rules that moved (London's all-year summer time until late 1971,
    Apia crossing the date line in 2011, Casablanca's +01 since 2018): no one offset is exact."""
    with pytest.raises(ConfigError) as e:
        system_zone(_cfg(), DDL, _offsets(host_zone))
    assert e.value.key == "source.systemTimeZone" and e.value.file == "sluice.yml"
    assert "shop.t" in str(e.value) and "ALTER TABLE t ADD c" in str(e.value) and "Nothing was acked" in str(e.value)
    assert "set source.systemTimeZone in sluice.yml" in e.value.hint
    # the fix, followed: the host's zone by name
    assert system_zone(_cfg(host_zone), DDL, _offsets(host_zone)) == host_zone


def test_a_named_zone_that_is_not_the_sources_is_refused():
    with pytest.raises(ConfigError) as e:
        system_zone(_cfg("Europe/London"), DDL, _offsets("Europe/Berlin"))
    assert e.value.key == "source.systemTimeZone" and "Europe/London" in str(e.value)
    assert "1971-11-01 12:00" in str(e.value)  # London's all-year summer time was Berlin's winter until then
    with pytest.raises(ConfigError):  # one offset apart for a year only (Lisbon's CET of 1966-76)
        system_zone(_cfg("Europe/Lisbon"), DDL, _offsets("Europe/London"))


def test_an_unreachable_source_fails_the_ddl_unless_the_zone_is_named():
    with pytest.raises(SourceError) as e:
        ddl_time_zone(_cfg(), DDL)
    assert "SYSTEM time zone" in str(e.value) and "nothing was acked" in str(e.value)
    assert "source.systemTimeZone" in e.value.hint
    assert ddl_time_zone(_cfg("Europe/Berlin"), DDL) == "Europe/Berlin"


def test_a_named_session_zone_is_used_as_it_is_and_no_zone_needs_no_source():
    named = DdlChange("ALTER", "shop", "t", "x", time_zone="America/New_York")
    assert ddl_time_zone(_cfg(), named) == "America/New_York"
    assert ddl_time_zone(_cfg(), DdlChange("ALTER", "shop", "t", "x")) == ""  # unreachable: any zone is exact


def test_pre_flight_warns_of_a_system_zone_whose_offset_changes():
    from structlog.testing import capture_logs

    from pipeline.job import zones

    cfg = _cfg()
    key = (cfg.source.host, cfg.source.port, False)
    try:
        for answer, warned in ((_offsets("Europe/Berlin"), True), (_offsets("Asia/Kolkata"), False),
                               ("America/New_York", False)):
            zones._ZONES[key] = answer  # what the source's global zone answered (cached per process)
            with capture_logs() as logs:
                zones.warn_of_system_zone(cfg)
                zones.warn_of_system_zone(_cfg("Europe/Berlin"))  # named: nothing to warn of
            assert [x["fix"] for x in logs] == (["set source.systemTimeZone in sluice.yml to the source host's zone "
                                                 "by name (e.g. Europe/Berlin)"] if warned else [])
    finally:
        zones._ZONES.pop(key, None)
    with capture_logs() as logs:
        zones.warn_of_system_zone(cfg)  # unreachable: the source's own checks say so
    assert logs == []
