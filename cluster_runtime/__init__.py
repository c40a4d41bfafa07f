"""duetto cluster_runtime."""
