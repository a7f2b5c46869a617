"""The peer: reminders sent the way a Python team builds it without this product.

Celery with a Redis broker, one task per reminder, a PostgreSQL ledger row claimed before
the send (``INSERT ... ON CONFLICT DO NOTHING``) and finalized after, the service's own
template and ``.eml`` writer (so both sides do the same work per email). ``app`` is the
Celery application, ``tasks`` the task, ``producer`` the cron job that enqueues due
reminders. Configured by environment variables (``PEER_*``, see ``app.py``).
"""
