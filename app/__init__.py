"""reminder-relay: per-user reminders delivered once, behind an at-least-once push queue."""
