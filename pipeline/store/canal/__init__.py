"""The canal topic (``store.kind: kafka`` with ``writtenBy: canal``): topics canal-server writes,
in canal's own flatMessage format, read and acked by Sluice; nothing is captured into them.

:mod:`.store` (CanalTopicStore), :mod:`.status` (``sluice store status``). A sibling of
:mod:`pipeline.store.kafka`, not a kind of it: both stand on :mod:`pipeline.store.kafka.base` and
read Kafka through the Kafka kind's client and Spark source. See docs/kafka.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config import Config

    from .store import CanalTopicStore


def open_log(cfg: Config, *, create: bool) -> CanalTopicStore:
    """The canal topic ``store.kafka`` names; the family's entry point."""
    from .store import CanalTopicStore

    return CanalTopicStore(cfg, create=create)
