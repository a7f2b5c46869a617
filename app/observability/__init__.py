"""Metrics and structured logs (the request-id middleware is the API's: ``app.api.request_id``)."""

from app.observability.logs import StdoutHandler, configure_logging, record_formatter
from app.observability.metrics import (
    SWEEP_ENQUEUED,
    InstrumentedProvider,
    instrument_chains,
    instrument_providers,
    prepare_metrics_dir,
    record_auth_failure,
    record_auth_throttled,
    record_delivery,
    record_push_refused,
    record_sweep,
)

__all__ = [
    "SWEEP_ENQUEUED",
    "InstrumentedProvider",
    "StdoutHandler",
    "configure_logging",
    "instrument_chains",
    "instrument_providers",
    "prepare_metrics_dir",
    "record_auth_failure",
    "record_auth_throttled",
    "record_delivery",
    "record_formatter",
    "record_push_refused",
    "record_sweep",
]
