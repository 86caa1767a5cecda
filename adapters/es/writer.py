"""The search-index :class:`~adapters.base.Writer`, for Elasticsearch and OpenSearch alike.

The target's client (elasticsearch-py or opensearch-py, adapters/es/api.py) is the only
difference between the two. A search server has no transactions: ``apply`` writes the chunk (bulk requests, re-queries)
and raises TransientError/TargetError when something did not land; ``commit`` has nothing
left to do and ``rollback`` cannot undo. That is safe because every action is idempotent
(``index``/``delete`` by ``_id``, partial ``update`` with the row's values, re-queried
documents): the job retries or replays the whole chunk and reaches the same documents.
"""

from __future__ import annotations

from typing import Any

from adapters.base import Change, Writer
from adapters.es import bulk, requery
from adapters.es.chunk import ChunkApplier
from adapters.es.config import EsTarget
from adapters.es.documents import doc_plan
from pipeline.errors import ConfigError, SluiceError, TargetError


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
            if plan.relation is not None:
                self._check_join_field(m, plan)
            self._check_source(m, plan)

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
        try:
            sql = requery.strip_sql(plan.sql) + "\nLIMIT 0"
            rows = requery.requery(src, db, sql, [], None, f"checking {m.file} on the source")
            for _ in rows:
                pass
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


def make_writer(target: EsTarget, mappings: tuple[Any, ...]) -> EsWriter:
    return EsWriter(target, tuple(mappings))
