"""Operating Sluice: the scheduled ``sluice run``, its run log, status and lag, metrics,
``sluice verify`` (source vs target comparison) and the HTML run report (docs/operations.md)."""
