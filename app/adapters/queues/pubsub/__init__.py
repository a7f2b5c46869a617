"""Google Pub/Sub: REST API client, publisher, setup."""
