"""Adapters: queue publishers, push formats and channel providers, one module each."""
