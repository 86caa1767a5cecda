"""Full loads (``sluice etl``) and bootstrap with a consistent hand-off to the binlog.

``ranges`` splits tables by primary key, ``values``/``source`` read rows as capture's value
strings, ``plan`` describes what to read, ``job`` runs the Spark load through the adapters
(``Change(kind="UPSERT")``), ``snapshot`` takes the hand-off position and ``bootstrap`` ties
them together. See docs/etl.md.
"""
