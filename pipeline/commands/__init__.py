"""Sub-commands of ``sluice``; importing this package registers them on the app."""

from pipeline.commands import store_cmd  # noqa: F401
