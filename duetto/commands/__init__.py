"""Command groups of the duetto CLI; each module exposes ``register(app)``."""
