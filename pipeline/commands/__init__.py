"""Sub-commands of ``sluice``; importing this package registers them on the app."""

from pipeline.commands import (  # noqa: F401  (importing registers the commands)
    bootstrap_cmd,
    capture_cmd,
    deadletter_cmd,
    etl_cmd,
    jvm_cmd,
    repair_cmd,
    report_cmd,
    run_cmd,
    status_cmd,
    store_cmd,
    sync_cmd,
    verify_cmd,
)
