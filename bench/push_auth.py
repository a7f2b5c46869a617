"""Push authentication cost per delivery, each format next to the Infrai HMAC, in process.

For every push format: the same JSON payload, authenticated ``--auth-iterations`` times as
its queue would send it (HMAC header, query token, or a Google OIDC token RS256-signed by a
test key whose certificate the verifier has cached, as in production after the first fetch;
SNS signatures v1/v2 whose certificate the verifier fetched once over HTTPS on loopback and
then caches; an Upstash JWT with parsed keys), then parsed into a ``Delivery``. Reported: µs
per ``authenticate`` and per ``parse``, the median of five rounds. The wrk phases of
``bench/push.py`` measure the whole route. Alone: ``.venv/bin/python -m bench.push_auth``.
"""

from __future__ import annotations

import asyncio
import base64
import statistics
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import orjson

from app.adapters.push_formats.google_oidc import (
    GoogleCertificates,
    GoogleOidcVerifier,
    OidcRequirements,
)
from app.adapters.push_formats.signatures import sign
from app.adapters.queues.cloudtasks.push_format import CloudTasksPushFormat
from app.adapters.queues.infrai.push_format import InfraiPushFormat
from app.adapters.queues.pubsub.push_format import PubSubPushFormat
from app.domain.messages import PushRequest
from app.domain.ports import PushFormat

SECRET = b"bench-push-secret-0123456789abcdef"
PAYLOAD = {"v": 1, "reminder_id": "bench:0000001", "channel": "email", "schedule_version": 1}
ROUNDS = 5


@dataclass(frozen=True)
class Case:
    """One format and a request as its queue sends it."""

    name: str
    push_format: PushFormat
    request: PushRequest


async def cases(stack: AsyncExitStack) -> list[Case]:
    """Every push format this tree ships, with an authentic request each."""
    from bench.push_auth_aws import aws_cases
    from tests.support.google_tokens import AUDIENCE, SERVICE_ACCOUNT, SigningKey

    key = SigningKey.generate("bench-key")
    oidc = _cached_verifier(key, AUDIENCE, SERVICE_ACCOUNT)
    token = {"authorization": f"Bearer {key.mint(time.time())}"}
    body = orjson.dumps(PAYLOAD)
    task = {"x-cloudtasks-taskname": "bench-task", "x-cloudtasks-taskretrycount": "0"}
    envelope = {"message": {"data": base64.b64encode(body).decode(), "messageId": "1"}}
    wrapped = orjson.dumps(envelope | {"subscription": "projects/p/subscriptions/s"})
    infrai_body = orjson.dumps({"message_id": "bench-1", "payload": PAYLOAD})
    hmac_header = "x-infrai-signature"
    return [
        Case(
            "infrai hmac",
            InfraiPushFormat([SECRET]),
            PushRequest(infrai_body, {hmac_header: sign(SECRET, infrai_body)}),
        ),
        Case(
            "cloudtasks hmac",
            CloudTasksPushFormat(oidc=None, secrets=[SECRET], signature_header=hmac_header),
            PushRequest(body, task | {hmac_header: sign(SECRET, body)}),
        ),
        Case(
            "cloudtasks oidc",
            CloudTasksPushFormat(oidc=oidc, secrets=[], signature_header=hmac_header),
            PushRequest(body, task | token),
        ),
        Case(
            "pubsub token",
            PubSubPushFormat(oidc=None, tokens=[SECRET]),
            PushRequest(wrapped, {}, {"token": SECRET.decode()}),
        ),
        Case("pubsub oidc", PubSubPushFormat(oidc=oidc, tokens=[]), PushRequest(wrapped, token)),
        *(Case(*case) for case in await aws_cases(stack)),
    ]


def _cached_verifier(key, audience: str, service_account: str) -> GoogleOidcVerifier:
    document = orjson.dumps({key.kid: key.certificate_pem})

    async def fetch(url: str) -> tuple[bytes, str | None]:
        return document, "max-age=86400"

    requirements = OidcRequirements(audience, service_account, "in-process")
    return GoogleOidcVerifier(requirements, GoogleCertificates("in-process", fetch))


async def _time_per_call(call: Callable[[], object], iterations: int) -> float:
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(iterations):
            result = call()
            if asyncio.iscoroutine(result):
                await result
        rounds.append((time.perf_counter() - started) / iterations)
    return statistics.median(rounds) * 1e6


async def measure(iterations: int) -> list[tuple[str, float, float]]:
    """(format, µs per authenticate, µs per parse) for every case."""
    rows = []
    now = time.time()
    async with AsyncExitStack() as stack:
        for case in await cases(stack):
            fmt, request = case.push_format, case.request
            await fmt.authenticate(request, now=now)  # first call fetches and parses keys
            auth = await _time_per_call(
                lambda f=fmt, r=request: f.authenticate(r, now=now), iterations
            )
            parse = await _time_per_call(
                lambda f=fmt, r=request: f.parse("reminders", r), iterations
            )
            rows.append((case.name, auth, parse))
    return rows


def print_auth_costs(iterations: int) -> None:
    """Measure and print the table."""
    rows = asyncio.run(measure(iterations))
    base = rows[0][1]
    print(f"\npush authentication per delivery ({iterations} calls x {ROUNDS} rounds, median):")
    print(f"  {'format':<18} {'auth µs':>9} {'x hmac':>7} {'parse µs':>9}")
    for name, auth, parse in rows:
        print(f"  {name:<18} {auth:>9.1f} {auth / base:>7.1f} {parse:>9.1f}")


if __name__ == "__main__":
    print_auth_costs(2000)
