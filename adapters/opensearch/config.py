"""``outerAdapters`` entries with ``name: opensearch``: the same keys as the Elasticsearch adapter's.

::

    - name: opensearch
      key: os1
      hosts: 127.0.0.1:9200              # comma-separated; http:// assumed, https://host:port allowed
      properties:
        security.auth: user:password     # basic auth (or security.authEnv: VAR holding user:password)
        security.ca.path: /etc/os/ca.pem # TLS (https:// hosts); also security.cert.path/key.path/verify
        cluster.name: my-cluster         # when given, check() verifies it

The entry becomes an :class:`~adapters.es.config.EsTarget` with ``product="opensearch"``, so the
shared writer talks to it through opensearch-py (adapters/opensearch/client.py). ``mode`` may
only be ``rest``. Errors name the file and the key, as the Elasticsearch adapter's do.
"""

from __future__ import annotations

#: the ``product`` of the targets of ``name: opensearch`` entries (parsed by
#: :func:`adapters.es.config.target_of`, through factory.py)
PRODUCT = "opensearch"
