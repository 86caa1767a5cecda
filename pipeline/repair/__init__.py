"""``sluice repair``: make a diverged target equal to its source again, table by table, online.

driver.py (the Spark job on the driver), plan.py (tables and key ranges), task.py (one key range
on an executor), rdb.py / docs.py (compare and rewrite a chunk of an RDB table / an ES index or
HBase table), guard.py (the group's apply lock and the source snapshot that make a chunk's
rewrite safe while replication runs), record.py (repaired tables, capture waivers).
docs/repair.md has the algorithm and why it is exact.
"""
