"""duetto benchmarks."""
