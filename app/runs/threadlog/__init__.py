"""The thread-stream protocol's durable per-thread event log (storage and reading)."""
