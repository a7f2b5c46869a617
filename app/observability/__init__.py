"""Metrics (``metrics``), structured logs (``logs``) and tracing (``tracing``); the
request-id middleware is the API's (``app.api.request_id``).

Nothing is imported here: ``serve``'s supervisor configures its logs from ``logs`` alone,
without the metrics and the settings they pull in (``app.supervisor``).
"""
