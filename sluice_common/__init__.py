"""What ``pipeline`` and ``adapters`` both use, below both: imports run one way (issue #41).

* :mod:`sluice_common.errors`: the error taxonomy (``SluiceError`` and its kinds, each with a
  ``fix:`` hint and an exit code); each adapter's ``errors.py`` translates its driver's
  exceptions into these.
* :mod:`sluice_common.exitcodes`: the exit code of every ``sluice`` command (docs/operations.md).
* :mod:`sluice_common.logs`: structured logging and the redaction of secrets in log lines.
* :mod:`sluice_common.secrets`: :class:`~sluice_common.secrets.Secret` (a password that never
  prints) and where a password may come from.
* :mod:`sluice_common.mysqltypes`: the MySQL/MariaDB type vocabulary (type parsing, the integer
  (sizes and ranges), float, decimal, temporal, binary and spatial type names, identifier quoting).
* :mod:`sluice_common.dmlvalues`: the Dml record's value text rules (a decoded value -> its
  string), shared by capture, the full load and verify.
* :mod:`sluice_common.normalize`: values read back from a source or a target made comparable
  across drivers, and source values as capture's Dml text (verify, repair).
* :mod:`sluice_common.chunksql`: the SQL of a chunked compare that the source and an RDB target
  both run (key ranges, checksums, select lists), for verify (adapters/rdb) and repair (pipeline).
* :mod:`sluice_common.mysqlddl`: DDL statement syntax the job and the RDB adapter both parse
  (identifiers, leading comments, the table a ``CREATE TABLE ... LIKE`` copies).

This package imports nothing from ``pipeline`` or ``adapters``
(``tests/unit/test_import_direction.py``). The adapter contract stays ``adapters/base.py``.
"""
