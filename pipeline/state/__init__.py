"""The driver's own state, kept in the store's local folder (``store.path/<source>``) whatever the
store's kind: not a change log, and no part of one.

:mod:`.locks` (process locks: capture, each group's apply, a follower's claim, a repair's lease),
:mod:`.runlog` (``runs.jsonl``, the history of ``sluice run``), :mod:`.deadletter` (rows a target
rejected, kept for replay), :mod:`.waivers` (repairs that let a refused change go). The files keep
their places under the store root (docs/store.md, docs/operations.md, docs/deadletter.md); the
change log's kinds (:mod:`pipeline.store`) take their locks from here.
"""
