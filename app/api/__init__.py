"""HTTP layer: parse, call one service, return a schema. No SQL, no graph execution."""
