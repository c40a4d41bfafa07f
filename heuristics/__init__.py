"""duetto heuristics."""
