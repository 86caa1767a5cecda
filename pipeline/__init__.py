"""Sluice: batch change replication from the MySQL/MariaDB binlog through Spark."""

__version__ = "0.1.0"
