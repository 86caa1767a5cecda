"""The source: how to connect to the MySQL/MariaDB source (:mod:`pipeline.source.connect`) and
what its catalog says. Its type names and value text rules are shared with the adapters, so they
live below both, in :mod:`sluice_common.mysqltypes`."""
