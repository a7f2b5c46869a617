"""Persistence: table definitions, the engine, and one repository module per table group."""
