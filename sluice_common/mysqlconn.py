"""How to reach a MySQL/MariaDB server with pymysql, for every reader of a source: the arguments
(address, credentials, connect timeout, TLS) and the session time zone of a reading connection.

``pipeline/source/connect.py`` builds the deployment's source connections from these (capture,
pre-flight, status, ETL, verify); the search adapters' join re-queries (``adapters/es/requery.py``)
build theirs from their own ``srcDataSources`` entry with the same arguments, so each honours
TLS and sends the password the same way (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice_common.secrets import Secret

#: the session time zone of every reading connection: TIMESTAMPs as stored instants (UTC)
UTC_SESSION = "SET time_zone = '+00:00'"


def params(host: str, port: int, user: str, password: Secret, connect_timeout: float,
           ssl: Mapping[str, Any] | None) -> dict[str, Any]:
    """pymysql's arguments for a server: address, credentials, connect timeout and TLS (if any; none
    at all, not even tried, for ``{"disabled": True}``).
    The password goes as its UTF-8 bytes (:meth:`Secret.utf8`: pymysql would send a ``str`` as Latin-1)."""
    kw: dict[str, Any] = {"host": host, "port": port, "user": user, "password": password.utf8(),
                          "connect_timeout": connect_timeout}
    if ssl and ssl.get("disabled"):  # ``source.ssl: {disabled: true}``: plain text, not even tried
        kw["ssl_disabled"] = True
    elif ssl:
        kw["ssl"] = dict(ssl)
    return kw
