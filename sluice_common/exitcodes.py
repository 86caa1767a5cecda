"""The exit codes every ``sluice`` command follows (the table in docs/operations.md).

One meaning per code, whatever the command: a scheduler or a script can act on the code alone.
"""

from __future__ import annotations

#: done: work was done, or (verify, store verify) everything compared equal / intact
OK = 0
#: the command ran and failed: a stage of a run, a sync whose partitions did not commit, a source
#: or target that cannot be reached or refuses, a comparison that could not be made, an
#: unexpected error, dead-lettered rows that still fail on replay
FAILED = 1
#: the command could not start: a usage error (unknown option, missing --config), a config or
#: mapping error (the message names the file and the key), an unknown group, a mapping that does
#: not fit its source or target table, a store that cannot be used (not there, read-only, newer)
CONFIG = 2
#: another process holds a lock this command needs (capture, or a group's apply); nothing was harmed
LOCKED = 3
#: ``sluice run``: nothing to do (no new rows, nothing pending); ``--nothing-exit-code`` changes it
NOTHING = 4
#: ``sluice verify``: a table differs; ``sluice store verify``: a batch file is corrupt
DIFFERENT = 5
#: stopped by SIGINT/SIGTERM (nothing half-applied was acked)
INTERRUPTED = 130
