"""Sluice target adapters."""
