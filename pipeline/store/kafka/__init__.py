"""The Kafka store (``store.kind: kafka``): the change log as Kafka topics, canal's MQ mode.

:mod:`.store` (KafkaStore, Sluice-written topics), :mod:`.canal` (topics canal-server wrote),
:mod:`.producer` (capture's transactions), :mod:`.batches` (the batch topic), :mod:`.routing`
(canal's topic and partition rules), :mod:`.frame` (Spark's Kafka source), :mod:`.client`.
See docs/kafka.md.
"""
