"""MCP and A2A over the REST API's services (beside app/api/, never talking to storage)."""
