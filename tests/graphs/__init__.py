"""Deterministic graphs for the run-engine tests (served from tests/graphs/langgraph.json)."""
