"""Full loads (``sluice etl``) and bootstrap with a consistent hand-off to the binlog.

``ranges`` splits tables by primary key, ``values``/``source`` read rows as capture's value
strings, ``plan`` describes what to read, ``driver`` plans and runs the Spark load,
``partition`` is its executor side (pages of a key range through the adapters as
``Change(kind="UPSERT")``), ``progress`` carries the live row counts to the driver,
``snapshot`` takes the hand-off position and ``bootstrap`` ties them together. See docs/etl.md.
"""
