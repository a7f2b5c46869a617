"""``reminders demo``: the whole flow on one machine, on a fresh database, with time travel.

Nothing here is production wiring: the scenario drives the real service (HTTP API, cron
sweep, embedded queue and dispatcher, push receiver, outbox and signed-webhook providers)
in one process, against a small local webhook endpoint that fails on purpose. A
travelling clock stands in for waiting days; every component reads that one clock.
"""
