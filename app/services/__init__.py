"""Use cases: each takes its connections, ports and the current time as arguments."""
