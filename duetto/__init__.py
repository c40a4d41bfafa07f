"""duetto duetto."""
