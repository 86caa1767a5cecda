"""The Kafka store (``store.kind: kafka``): the change log as Kafka topics, canal's MQ mode.

:mod:`.store` (KafkaStore, Sluice-written topics), :mod:`.status` (``sluice store status``),
:mod:`.base` (what every store on Kafka topics has; the sibling kind :mod:`pipeline.store.canal`
stands on it too), :mod:`.producer` (capture's transactions), :mod:`.batches` (the batch topic),
:mod:`.routing` (canal's topic and partition rules), :mod:`.frame` (Spark's Kafka source),
:mod:`.client`. See docs/kafka.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config import Config

    from .store import KafkaStore


def open_log(cfg: Config, *, create: bool) -> KafkaStore:
    """The Kafka store ``store.kafka`` names (imported here, not with the package: the job's Spark
    side imports ``kafka/`` modules without the producer); the family's entry point."""
    from .store import KafkaStore

    return KafkaStore(cfg, create=create)
