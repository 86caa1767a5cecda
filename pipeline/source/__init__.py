"""The source vocabulary, in one place: how to connect to the MySQL/MariaDB source
(:mod:`pipeline.source.connect`) and its type names and value text rules
(:mod:`pipeline.source.mysqltypes`)."""
