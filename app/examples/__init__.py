"""Example graphs served when `graphkeep serve` has no --config (offline, no API keys)."""
