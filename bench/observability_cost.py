"""What observability costs per request: ``record_delivery``, the request-log middleware and
the tracing hooks of a delivery (off, the default, and on).

``python -m bench.observability_cost`` prints microseconds per call, measured in-process
(no network) so the numbers isolate our code: the metric updates plus the JSON log line
written to /dev/null, and the ASGI middleware (request id, access line) around a
do-nothing app — for an API request (the middleware writes the access line) and for a push
(the route's delivery line is the access line: the middleware writes none). Tracing: what a
delivery pays for the tracing hooks — the receiver's check, the provider wrapper's span and
the payload's trace field — with tracing off (the default: nothing but a flag test and a
shared no-op context) and on (two spans continuing the payload's trace, kept in memory).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from app.api.request_log import LOGGED, RequestLogMiddleware
from app.domain.messages import Delivery, parse_delivery_payload
from app.domain.states import Outcome
from app.observability import tracing
from app.observability.logs import configure_logging
from app.observability.metrics import record_delivery
from app.services.receive import Answer

N = 50_000


def time_record_delivery() -> float:
    """Microseconds per ``record_delivery`` call (metrics + one JSON line)."""
    delivery = Delivery("reminders", "0193a9f1-6f1e-7c2a-9b7e-1234567890ab", {}, attempt=1)
    answer = Answer(Outcome.SENT, reminder_id="digest:cust_1842:2026-W33", channel="email")
    request = {"method": "POST", "route": "/push/{queue}", "status": 200}
    for _ in range(1000):
        record_delivery(delivery, answer, 0.0012, **request)
    started = time.perf_counter()
    for _ in range(N):
        record_delivery(delivery, answer, 0.0012, **request)
    return (time.perf_counter() - started) / N * 1e6


async def _bare(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _push(scope: Any, receive: Any, send: Any) -> None:
    scope[LOGGED] = True  # as the push route does after its delivery line
    await _bare(scope, receive, send)


async def _time_app(app: Any) -> float:
    scope = {"type": "http", "method": "POST", "headers": [(b"x-request-id", b"abc-123")]}

    async def receive() -> dict[str, str]:
        return {"type": "http.request"}

    async def send(_message: Any) -> None:
        return None

    for _ in range(1000):
        await app(scope, receive, send)
    started = time.perf_counter()
    for _ in range(N):
        await app(scope, receive, send)
    return (time.perf_counter() - started) / N * 1e6


async def _delivery_hooks(payload: dict[str, Any]) -> None:
    # The tracing work of one delivery, as app/services/receive.py and the provider wrapper
    # (app/observability/metrics.py) do it around the real work.
    parsed = parse_delivery_payload(payload, channels=frozenset({"email"}))
    if tracing.tracing_enabled():
        with tracing.span("reminders.deliver", traceparent=parsed.traceparent):
            with tracing.span("reminders.provider.send", attributes={"reminders.provider": "x"}):
                pass
            tracing.set_span_attribute("reminders.outcome", "sent")
    else:
        with tracing.span("reminders.provider.send", attributes={"reminders.provider": "x"}):
            pass


async def _no_hooks(payload: dict[str, Any]) -> None:
    parse_delivery_payload(payload, channels=frozenset({"email"}))  # the baseline


async def _time_hooks(payload: dict[str, Any], run: Any = _delivery_hooks) -> float:
    for _ in range(1000):
        await run(payload)
    started = time.perf_counter()
    for _ in range(N):
        await run(payload)
    return (time.perf_counter() - started) / N * 1e6


def time_tracing() -> tuple[float, float]:
    """Microseconds of tracing hooks per delivery beyond parsing the payload: off, then on
    (in-memory exporter)."""
    payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
    baseline = asyncio.run(_time_hooks(payload, _no_hooks))
    off = asyncio.run(_time_hooks(payload)) - baseline
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing.enable_tracing(exporter=exporter)
    try:
        traced = payload | {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
        on = asyncio.run(_time_hooks(traced)) - baseline
    finally:
        tracing.disable_tracing()
    return off, on


def main() -> None:
    """Print the measurements."""
    with open(os.devnull, "w") as sink:
        configure_logging("INFO", log_format="json", stream=sink)
        per_delivery = time_record_delivery()
        bare = asyncio.run(_time_app(_bare))
        api = asyncio.run(_time_app(RequestLogMiddleware(_bare)))
        push = asyncio.run(_time_app(RequestLogMiddleware(_push)))
    print(f"record_delivery: {per_delivery:.1f} us/call")
    print(f"request-log middleware, API request (access line): {api - bare:.1f} us/request")
    print(f"request-log middleware, push (no second line): {push - bare:.1f} us/request")
    off, on = time_tracing()
    print(f"tracing hooks per delivery, off (default): {off:.2f} us; on (2 spans): {on:.1f} us")


if __name__ == "__main__":
    main()
