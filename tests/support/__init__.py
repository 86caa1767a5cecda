"""Helpers shared by integration and e2e tests (sysbench workloads, store replay checks)."""
