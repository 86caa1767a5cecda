"""Sub-commands of ``sluice``; importing this package registers them on the app."""

from pipeline.commands import capture_cmd, store_cmd, sync_cmd  # noqa: F401
