"""Which MariaDB target failures are row errors (may be dead-lettered) and which are not."""

from __future__ import annotations

import pytest

from adapters.base import Change
from adapters.rdb import RdbTable
from sluice_common.errors import RowError, TargetError, is_row_error
from tests.integration.test_rdb_conformance import MariaEnv, apply


@pytest.fixture(scope="module")
def maria(mariadb_target):
    e = MariaEnv(mariadb_target)
    e.run(f"CREATE TABLE {e.q(e.schema)}.t (id INT PRIMARY KEY, v VARCHAR(5) NOT NULL, n TINYINT, "
          "u VARCHAR(5), UNIQUE KEY (u))")
    e.run(f"INSERT INTO {e.q(e.schema)}.t VALUES (100, 'x', 1, 'taken')")
    yield e
    e.drop()


def _ins(i: int, **cols) -> Change:
    data = {"id": str(i), "v": "ok", "n": "1", "u": None, **cols}
    types = {"id": "int(11)", "v": "varchar(20)", "n": "int(11)", "u": "varchar(20)"}
    return Change("INSERT", "src", "t", data, pk_names=("id",), mysql_type=types, seq=(1, i, 0))


@pytest.mark.parametrize("cols, code", [({"v": "much too long"}, "1406"), ({"n": "1000"}, "1264"),
                                        ({"v": None}, "1048"), ({"u": "taken"}, "1062")])
def test_a_rows_own_data_is_a_row_error_naming_the_key(maria, cols, code):
    route = RdbTable("t", maria.schema)
    with pytest.raises(RowError, match=code) as exc:
        apply(maria, route, [[_ins(1), _ins(2, **cols), _ins(3)]])
    assert exc.value.key == "{id='2'}"  # the multi-row statement was narrowed to the row


def test_a_missing_table_or_column_is_not_a_row_error(maria):
    with pytest.raises(TargetError) as exc:
        apply(maria, RdbTable("missing", maria.schema), [[_ins(1)]])
    assert not is_row_error(exc.value)
    with pytest.raises(TargetError) as exc:
        apply(maria, RdbTable("t", maria.schema), [[_ins(1, extra="x")]])
    assert not is_row_error(exc.value)
