"""The integration tests' shared fixtures (tests/support/ledger_gateways.py)."""

from tests.support.ledger_gateways import engine, gateway  # noqa: F401
