"""SNS and QStash requests for ``bench/push_auth.py``: authentic pushes as each queue sends them.

SNS: notifications signed (v1 SHA1withRSA, v2 SHA256withRSA) by a test key whose certificate
an HTTPS server on loopback serves; the verifier fetches it once and then works from its
cache, as in production. QStash: an ``Upstash-Signature`` JWT minted as Upstash documents.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import orjson

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.qstash.push_format import QStashPushFormat
from app.adapters.queues.sns.push_format import CertificateStore, SnsPushFormat
from app.domain.messages import PushRequest
from app.domain.ports import PushFormat

PAYLOAD = {"v": 1, "reminder_id": "bench:0000001", "channel": "email", "schedule_version": 1}


async def aws_cases(stack: AsyncExitStack) -> list[tuple[str, PushFormat, PushRequest]]:
    """(name, format, request) for SNS v1, SNS v2 and QStash; servers closed by ``stack``."""
    from tests.support.qstash import CURRENT_KEY, NEXT_KEY, PUSH_URL, push_headers
    from tests.support.sns import TOPIC_ARN, SnsHost, body, client_ssl

    host = SnsHost()
    await host.start()
    stack.push_async_callback(host.stop)
    http = SharedHttp()
    stack.push_async_callback(http.aclose)
    store = CertificateStore(http, host_pattern="localhost", ssl=client_ssl())
    sns = SnsPushFormat([TOPIC_ARN], store, http)
    at = datetime.now(UTC)
    text = {"content-type": "text/plain; charset=UTF-8"}
    raw = orjson.dumps(PAYLOAD)
    qstash = QStashPushFormat([CURRENT_KEY.encode(), NEXT_KEY.encode()], push_url=PUSH_URL)
    return [
        ("sns v1 rsa-sha1", sns, PushRequest(body(host.notification(PAYLOAD, at=at)), text)),
        (
            "sns v2 rsa-sha256",
            sns,
            PushRequest(body(host.notification(PAYLOAD, at=at, version="2")), text),
        ),
        ("qstash jwt", qstash, PushRequest(raw, push_headers(raw, issued_at=time.time()))),
    ]
