"""assistants."""
