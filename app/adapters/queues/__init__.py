"""Queue publishers behind ``app.domain.ports.QueuePublisher``."""
