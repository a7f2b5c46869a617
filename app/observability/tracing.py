"""Optional OpenTelemetry tracing: ``pip install 'reminder-relay[otel]'`` and
``REMINDERS_OTEL_ENABLED=true``.

A reminder's trace starts when the sweep enqueues it (a root span per reminder, linked to
the sweep's span). Its W3C ``traceparent`` rides in the queue message's payload, so the
receiver continues that trace whichever queue carried the message and however late:
``reminders.deliver`` and, inside it, ``reminders.provider.send``. The OpenTelemetry
instrumentation packages add the rest: the API's server spans (FastAPI), every database
statement (SQLAlchemy, asyncpg) and the providers' outbound HTTP calls (aiohttp). Export is
OTLP over HTTP, configured by the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``, ...).

Off by default, and free when off: OpenTelemetry is not even imported; ``span`` hands back
one shared no-op context and ``current_traceparent`` returns None, so payloads stay as
they were (``bench/observability_cost.py`` measures the difference).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from app.settings.extras import OTEL

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

_NOOP: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
_tracer: Tracer | None = None  # set by enable_tracing; None: tracing is off
_provider: TracerProvider | None = None
_P = ParamSpec("_P")
_R = TypeVar("_R")
MISSING_EXTRA = OTEL.hint("REMINDERS_OTEL_ENABLED=true")


def tracing_enabled() -> bool:
    """True once ``enable_tracing`` ran in this process."""
    return _tracer is not None


def span(
    name: str, *, traceparent: str | None = None, attributes: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block, continuing ``traceparent`` when given (a no-op when off)."""
    if _tracer is None:
        return _NOOP
    return _start(_tracer, name, traceparent, attributes)


def traced(name: str) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Awaitable[_R]]]:
    """Decorate a coroutine function to run inside a span ``name`` (a plain call when off)."""

    def decorate(function: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
        @functools.wraps(function)
        async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _tracer is None:
                return await function(*args, **kwargs)
            with span(name):
                return await function(*args, **kwargs)

        return wrapper

    return decorate


def root_span(
    name: str, *, attributes: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span that starts a trace of its own, linked to the current span (a no-op when off)."""
    if _tracer is None:
        return _NOOP
    return _start_root(_tracer, name, attributes)


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to carry in a queue message; None when off."""
    if _tracer is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def set_span_attribute(key: str, value: str | int | float | bool) -> None:
    """Record an attribute (an outcome) on the current span; nothing when off."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attribute(key, value)


@contextlib.contextmanager
def _start(
    tracer: Tracer, name: str, traceparent: str | None, attributes: Mapping[str, Any] | None
) -> Iterator[Any]:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = None
    if traceparent:  # already a bounded string (parse_delivery_payload)
        # An invalid value extracts to an empty context: a new trace, never an error.
        context = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    with tracer.start_as_current_span(name, context=context, attributes=attributes) as current:
        yield current


@contextlib.contextmanager
def _start_root(tracer: Tracer, name: str, attributes: Mapping[str, Any] | None) -> Iterator[Any]:
    from opentelemetry import context, trace

    parent = trace.get_current_span().get_span_context()
    links = [trace.Link(parent)] if parent.is_valid else []
    with tracer.start_as_current_span(
        name, context=context.Context(), attributes=attributes, links=links
    ) as current:
        yield current


def enable_tracing(*, exporter: SpanExporter | None = None) -> TracerProvider:
    """Turn tracing on for this process (once: a second call returns the same provider):
    spans exported by ``exporter`` as they end (tests), else in batches over OTLP/HTTP as
    the OTEL_* variables say. Raises ``RuntimeError`` naming the extra when OpenTelemetry
    is not installed."""
    global _tracer, _provider
    if _provider is not None:
        return _provider
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as error:
        raise RuntimeError(MISSING_EXTRA) from error
    provider = TracerProvider(resource=Resource.create({"service.name": "reminder-relay"}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracer, _provider = provider.get_tracer("reminder-relay"), provider
    return provider


def disable_tracing() -> None:
    """Back to the no-op (tests): the next ``enable_tracing`` builds a new provider."""
    global _tracer, _provider
    _tracer = _provider = None


def instrument_libraries(provider: TracerProvider, *, engine: Any) -> None:
    """Database statements (SQLAlchemy engine, asyncpg) and outbound HTTP (aiohttp) spans,
    from the OpenTelemetry instrumentation packages."""
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    # The package declares SQLAlchemy < 2.1; the engine events it uses are unchanged in 2.1
    # (the test suite checks its spans on both databases).
    SQLAlchemyInstrumentor().instrument(
        engine=engine.sync_engine, tracer_provider=provider, skip_dep_check=True
    )
    for instrumentor in (AsyncPGInstrumentor(), AioHttpClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)


def instrument_app(app: Any, provider: TracerProvider) -> None:
    """Server spans for API requests (health and metrics probes left out)."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=provider, excluded_urls="healthz,readyz,metrics"
    )
