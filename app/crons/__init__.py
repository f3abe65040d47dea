"""Crons: scheduled runs (schedule math, SQL, use cases and the scheduler)."""
