"""Google Cloud Tasks: publisher (gRPC client), setup."""
