"""Pure rules of reminder-relay: no web, database or HTTP client imports live here."""
