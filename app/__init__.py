"""graphkeep: a self-hosted server for LangGraph graphs with durable persistence."""

__version__ = "0.1.0"
