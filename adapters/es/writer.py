"""The search-index :class:`~adapters.base.Writer`, for Elasticsearch and OpenSearch alike.

The target's client (elasticsearch-py or opensearch-py, adapters/es/api.py) is the only
difference between the two. A search server has no transactions: ``apply`` writes the chunk (bulk requests, re-queries)
and raises TransientError/TargetError when something did not land; ``commit`` has nothing
left to do and ``rollback`` cannot undo. That is safe because every action is idempotent
(``index``/``delete`` by ``_id``, partial ``update`` with the row's values, re-queried
documents): the job retries or replays the whole chunk and reaches the same documents.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from adapters.base import Change, Writer
from adapters.es import bulk, requery
from adapters.es.chunk import ChunkApplier
from adapters.es.config import EsTarget
from adapters.es.plan import doc_plan
from sluice_common.errors import ConfigError, SluiceError, TargetError, TargetMismatchError, TransientError
from sluice_common.logs import get_logger

log = get_logger("es")


class EsWriter(Writer):
    """Applies esMapping changes to one Elasticsearch or OpenSearch cluster."""

    target: EsTarget

    def check(self) -> None:
        """Cluster reachable (``cluster.health``: ES's integ-test build has no ``GET /``), the
        server the product configured, cluster name as configured, every mapping usable, join
        fields present, and the SQL runs on the source."""
        api = bulk.client(self.target)
        product = self.target.product_name
        try:
            health = api.health()
            server = api.server()
        except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
            raise api.error(e, "checking the cluster") from None
        if server is not None and server[0] != self.target.product:
            raise TargetError(f"the server at {self.target.label} is {server[0]} {server[1]}, not {product}",
                              hint="use name: opensearch for OpenSearch and name: es8 (es7) for Elasticsearch")
        name = health.get("cluster_name")
        if self.target.cluster_name and name != self.target.cluster_name:
            raise TargetError(f"{product} at {self.target.label} is cluster {name!r}, but the config says "
                              f"cluster.name {self.target.cluster_name!r}",
                              hint="fix hosts or properties.cluster.name")
        for m in self.mappings:
            plan = doc_plan(m)
            self._check_index(api, m, plan)
            if plan.relation is not None:
                self._check_join_field(m, plan)
            self._check_source(m, plan)

    def _check_index(self, api: Any, m: Any, plan) -> None:
        """The index (or alias) exists, or the cluster creates it on the first write (with dynamic
        mappings: a warning, since a typo in ``_index`` would fill a new index)."""
        try:
            if api.mapping(plan.index) is not None:
                return
            auto = auto_create_allowed(api.cluster_settings(), plan.index)
        except Exception as e:  # noqa: BLE001 - classified by the client's errors.py
            raise api.error(e, f"checking index {plan.index}") from None
        if not auto:
            raise TargetMismatchError(f"{m.file}: esMapping._index: index {plan.index} does not exist on "
                                      f"{self.target.label}, and the cluster does not create indices on write "
                                      "(action.auto_create_index)",
                                      hint=f"create it with the field mappings it needs (PUT /{plan.index}), or "
                                      "fix _index")
        log.warning(f"the index does not exist yet: {self.target.product_name} creates it with dynamic mappings on "
                    "the first write; create it first if its fields need types (docs/es.md)", mapping=m.file,
                    index=plan.index, target=self.target.label)

    def _check_join_field(self, m: Any, plan) -> None:
        types = bulk.field_types(self.target, plan.index)
        if types.get(plan.relation.field) != "join":
            raise TargetError(f"{m.file}: esMapping.relations: index {plan.index} has no join field "
                              f"'{plan.relation.field}' (found: {types.get(plan.relation.field) or 'nothing'})",
                              hint="create the index with a join field mapping first (this needs the "
                              "parent-join module on the server)")

    def _check_source(self, m: Any, plan) -> None:
        if plan.row_mode:
            return  # documents come from the binlog rows; the source is not re-queried
        try:
            src = self.target.source_for(m)
        except ConfigError:
            raise
        db = src.database
        if db is None and (plan.main_schema is None or any(j.schema is None for j in plan.joins)):
            return  # unqualified SQL: the database comes from each change
        with requery.connection(src):
            pass  # the source answers (a source down or refusing us is not a mapping error)
        try:
            sql = requery.strip_sql(plan.sql) + "\nLIMIT 0"
            rows = requery.requery(src, db, sql, [], None, f"checking {m.file} on the source")
            for _ in rows:
                pass
        except TransientError:
            raise
        except SluiceError as e:
            raise ConfigError(m.file, "esMapping.sql", f"does not run on the source {src.label}: {e.message}") \
                from None

    def open(self) -> None:
        bulk.client(self.target)

    def apply(self, mapping: Any, changes: list[Change]) -> None:
        if changes:
            ChunkApplier(self.target, doc_plan(mapping), mapping, self.stats).run(changes)

    def commit(self) -> None:
        """Nothing to do: ``apply`` wrote the chunk (see the module docstring)."""

    def rollback(self) -> None:
        """Nothing can be undone; the retried or replayed chunk rewrites the same documents."""

    def close(self) -> None:
        """Clients and source connections stay pooled for the process."""


def auto_create_allowed(resp: dict, index: str) -> bool:
    """Whether the cluster creates ``index`` on its first write, from its settings (``GET
    _cluster/settings?include_defaults&flat_settings``; ``action.auto_create_index``: true, false,
    or patterns such as ``+logs-*,-tmp-*``, where no match means no)."""
    value = None
    for part in ("transient", "persistent", "defaults"):
        value = (resp.get(part) or {}).get("action.auto_create_index")
        if value is not None:
            break
    text = str(value if value is not None else "true").strip().lower()
    if text in ("true", "false"):
        return text == "true"
    for pattern in (p.strip() for p in text.split(",") if p.strip()):
        allow = not pattern.startswith("-")
        if fnmatch.fnmatchcase(index, pattern.lstrip("+-")):
            return allow
    return False
