"""Push formats as targets of ``bench/push.py --formats``: each queue's authentication through
the real route, side by side in one run.

Every format is a service of its own (fresh database, same seed) configured for that queue
kind, sent the same deliveries the way that queue sends them, signed in this process just
before the service starts (tokens and signatures stay inside their lifetimes):

* ``hmac``: the Infrai envelope and ``sha256=`` header (the memory queue's format; the
  reference all others are compared with);
* ``cloudtasks-hmac`` / ``cloudtasks-oidc``: the raw payload with ``X-CloudTasks-*`` headers
  and our HMAC header, or a Google OIDC token (RS256, one per request);
* ``pubsub-token`` / ``pubsub-oidc``: the wrapped push envelope with ``?token=`` or a token;
* ``sns``: a v2 (SHA256withRSA) signed ``Notification`` envelope as ``text/plain``;
* ``qstash``: the raw payload with an ``Upstash-Signature`` JWT (HS256, one per request).

Google's certificate endpoint (plain HTTP) and an SNS certificate host (HTTPS, a throwaway CA
the service trusts through ``SSL_CERT_FILE``) run on loopback in a background thread of this
process; the service fetches each once and caches it, as in production, so the figures are
the per-delivery cost of verification with cached, parsed keys.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import statistics
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from app.adapters.push_formats.signatures import sign
from tests.support.channel_servers import TlsMaterial
from tests.support.google_tokens import AUDIENCE, SERVICE_ACCOUNT, SigningKey, certificate_server
from tests.support.loopback import serve
from tests.support.qstash import CURRENT_KEY, NEXT_KEY, PUSH_URL
from tests.support.qstash import mint as mint_qstash
from tests.support.sns import TOPIC_ARN, SnsHost, signing_certificate

FORMATS = (
    "hmac",
    "cloudtasks-hmac",
    "cloudtasks-oidc",
    "pubsub-token",
    "pubsub-oidc",
    "sns",
    "qstash",
)
QUEUE = "reminders"
PATH = f"/push/{QUEUE}"
SIGNATURE_HEADER = "X-Infrai-Signature"
HEADER_SEPARATOR = "\x1f"  # between "Name: value" pairs in a request line (deliveries.lua)
SNS_CERT_PATH = "/SimpleNotificationService-test.pem"  # where SnsHost.cert_url points


@dataclass(frozen=True)
class LoopbackKeys:
    """The signing side of the queues and where the service fetches their certificates."""

    google: SigningKey
    certs_url: str
    sns: SnsHost  # signs notifications; its port is the HTTPS certificate host's
    ca_file: Path  # the certificate host's CA, for SSL_CERT_FILE


def parse_formats(spec: str) -> list[str]:
    """``a,b,c`` → the format names, each checked."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in FORMATS]
    if unknown or not names:
        raise ValueError(f"unknown format(s) {unknown}; choose from {', '.join(FORMATS)}")
    return names


@contextmanager
def loopback_keys(work: Path) -> Iterator[LoopbackKeys]:
    """Google's certificate endpoint and an SNS certificate host, served until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="bench-keys", daemon=True)
    thread.start()

    def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=60)

    google = SigningKey.generate("bench-google-key")
    certs = certificate_server([google])
    tls = TlsMaterial()
    sns_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    try:
        server = run(certs.__aenter__())
        runner, port = run(_serve_sns_certificate(sns_key, tls))
        ca_file = work / "sns-ca.pem"
        tls.ca.cert_pem.write_to_path(str(ca_file))
        sns = SnsHost(key=sns_key, port=port)
        yield LoopbackKeys(google, server.url, sns, ca_file)
        run(runner.cleanup())
        run(certs.__aexit__(None, None, None))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


async def _serve_sns_certificate(key: rsa.RSAPrivateKey, tls: TlsMaterial) -> tuple:
    certificate = signing_certificate(key)

    async def answer(_request: web.Request) -> web.Response:
        return web.Response(body=certificate, content_type="text/plain")

    app = web.Application()
    app.router.add_get(SNS_CERT_PATH, answer)
    return await serve(app, ssl_context=tls.server_context())


def format_env(name: str, keys: LoopbackKeys) -> dict[str, str]:
    """The service settings (and SSL_CERT_FILE) that make ``name`` the queue's push format."""
    google = {
        "REMINDERS_GOOGLE_PUSH_SERVICE_ACCOUNT": SERVICE_ACCOUNT,
        "REMINDERS_GOOGLE_PUSH_AUDIENCE": AUDIENCE,
        "REMINDERS_GOOGLE_PUSH_CERTS_URL": keys.certs_url,
    }
    cloudtasks = {
        "REMINDERS_QUEUE": "cloudtasks",
        "REMINDERS_CLOUDTASKS_PROJECT": "bench",
        "REMINDERS_CLOUDTASKS_LOCATION": "here",
    }
    pubsub = {"REMINDERS_QUEUE": "pubsub", "REMINDERS_PUBSUB_PROJECT": "bench"}
    envs: dict[str, dict[str, str]] = {
        "hmac": {},  # the memory queue: the Infrai format
        "cloudtasks-hmac": cloudtasks,
        "cloudtasks-oidc": cloudtasks | google,
        "pubsub-token": pubsub,
        "pubsub-oidc": pubsub | google,
        "sns": {
            "REMINDERS_QUEUE": "sns",
            "REMINDERS_SNS_TOPIC_ARNS": f"{QUEUE}={TOPIC_ARN}",
            "REMINDERS_SNS_CERT_HOST_PATTERN": "localhost",
            "SSL_CERT_FILE": str(keys.ca_file),
        },
        "qstash": {
            "REMINDERS_QUEUE": "qstash",
            "REMINDERS_QSTASH_TOKEN": "bench-qstash-token",
            "REMINDERS_QSTASH_CURRENT_SIGNING_KEY": CURRENT_KEY,
            "REMINDERS_QSTASH_NEXT_SIGNING_KEY": NEXT_KEY,
            "REMINDERS_PUBLIC_BASE_URL": PUSH_URL.removesuffix(PATH),
        },
    }
    return {"REMINDERS_QUEUE_NAME": QUEUE} | envs[name]


def request_writer(name: str, keys: LoopbackKeys) -> Callable[[Path, bytes, range], None]:
    """A ``write(path, secret, ids)`` for ``bench/push.py``'s plan: one line per request."""
    return functools.partial(_write, name, keys)


def _write(name: str, keys: LoopbackKeys, path: Path, secret: bytes, ids: range) -> None:
    build = _BUILDERS[name]
    with path.open("w") as out:
        for i in ids:
            target, headers, body = build(keys, secret, i)
            pairs = HEADER_SEPARATOR.join(f"{k}: {v}" for k, v in headers.items())
            out.write(f"{target}\t{pairs}\t{body.decode()}\n")


def _payload(i: int) -> bytes:
    return orjson.dumps(
        {"v": 1, "reminder_id": f"bench:{i:07d}", "channel": "email", "schedule_version": 1}
    )


Built = tuple[str, dict[str, str], bytes]
JSON = {"Content-Type": "application/json"}


def _hmac(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    body = orjson.dumps({"message_id": f"bench-msg-{i}", "payload": orjson.loads(_payload(i))})
    return PATH, JSON | {SIGNATURE_HEADER: sign(secret, body)}, body


def _task_headers(i: int) -> dict[str, str]:
    return JSON | {"X-CloudTasks-TaskName": f"bench-task-{i}", "X-CloudTasks-TaskRetryCount": "0"}


def _cloudtasks_hmac(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    body = _payload(i)
    return PATH, _task_headers(i) | {SIGNATURE_HEADER: sign(secret, body)}, body


def _cloudtasks_oidc(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    token = keys.google.mint(time.time())
    return PATH, _task_headers(i) | {"Authorization": f"Bearer {token}"}, _payload(i)


def _wrapped(i: int) -> bytes:
    data = base64.b64encode(_payload(i)).decode()
    message = {"data": data, "messageId": f"bench-msg-{i}", "attributes": {}}
    return orjson.dumps({"message": message, "subscription": "projects/bench/subscriptions/s"})


def _pubsub_token(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    return f"{PATH}?token={secret.decode()}", JSON, _wrapped(i)


def _pubsub_oidc(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    token = keys.google.mint(time.time())
    return PATH, JSON | {"Authorization": f"Bearer {token}"}, _wrapped(i)


def _sns(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    payload = orjson.loads(_payload(i))
    signed = keys.sns.notification(
        payload, at=datetime.now(UTC), version="2", MessageId=f"bench-msg-{i}"
    )
    headers = {
        "Content-Type": "text/plain; charset=UTF-8",
        "x-amz-sns-message-type": "Notification",
        "x-amz-sns-topic-arn": TOPIC_ARN,
    }
    return PATH, headers, orjson.dumps(signed)  # one line: compact, the signature allows it


def _qstash(keys: LoopbackKeys, secret: bytes, i: int) -> Built:
    body = _payload(i)
    signature = mint_qstash(body, issued_at=time.time(), lifetime=3600)
    headers = JSON | {
        "Upstash-Signature": signature,
        "Upstash-Message-Id": f"bench-msg-{i}",
        "Upstash-Retried": "0",
    }
    return PATH, headers, body


_BUILDERS: dict[str, Callable[[LoopbackKeys, bytes, int], Built]] = {
    "hmac": _hmac,
    "cloudtasks-hmac": _cloudtasks_hmac,
    "cloudtasks-oidc": _cloudtasks_oidc,
    "pubsub-token": _pubsub_token,
    "pubsub-oidc": _pubsub_oidc,
    "sns": _sns,
    "qstash": _qstash,
}


def print_format_summary(all_phases: list[list[Any]], formats: list[str]) -> None:
    """One line per format: rates and server CPU per request, and the CPU above ``hmac``."""
    figures = {name: _medians(all_phases, name) for name in formats}
    base = figures.get("hmac")
    print(f"\npush formats through the route, medians over {len(all_phases)} repetition(s):")
    print(
        f"  {'format':<16} {'new /s':>8} {'dup /s':>8} {'srv µs/new':>11} {'srv µs/dup':>11}"
        f" {'Δ new µs':>9} {'Δ dup µs':>9}"
    )
    for name, (new_rate, dup_rate, new_cpu, dup_cpu) in figures.items():
        delta = (
            f" {new_cpu - base[2]:>+9.0f} {dup_cpu - base[3]:>+9.0f}" if base else ""
        )  # fmt: skip
        print(
            f"  {name:<16} {new_rate:>8.1f} {dup_rate:>8.1f} {new_cpu:>11.0f} {dup_cpu:>11.0f}"
            + delta
        )


def _medians(all_phases: list[list[Any]], target: str) -> tuple[float, float, float, float]:
    def of(phase: str) -> list[Any]:
        return [p for ph in all_phases for p in ph if (p.target, p.phase) == (target, phase)]

    new, dup = of("new"), of("duplicate")
    return (
        statistics.median(p.rate for p in new),
        statistics.median(p.rate for p in dup),
        statistics.median(p.server_cpu_s * 1e6 / max(p.requests, 1) for p in new),
        statistics.median(p.server_cpu_s * 1e6 / max(p.requests, 1) for p in dup),
    )
