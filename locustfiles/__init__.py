"""locustfiles."""
