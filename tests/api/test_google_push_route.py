"""``/push/{queue}`` with Google queues: each configured queue uses its own kind's format
(here email through Cloud Tasks, webhooks through Pub/Sub), OIDC tokens checked against
certificates served on loopback; each failed check answers 401 and sends nothing."""

from __future__ import annotations

import base64
import time
from datetime import timedelta

import orjson
import pytest

from app.adapters.queues.cloudtasks.settings import CloudTasksSettings
from app.adapters.queues.google_settings import GooglePushSettings
from app.adapters.queues.pubsub.settings import PubSubSettings
from app.adapters.queues.routing import RoutingPublisher
from app.container import build_container
from tests.conftest import make_settings
from tests.support.flow import put_customer, put_reminder
from tests.support.google_tokens import AUDIENCE, SERVICE_ACCOUNT, SigningKey, certificate_server

pytestmark = pytest.mark.anyio

GOOGLE_KEY = SigningKey.generate("google-key-1")
STRANGER_KEY = SigningKey.generate("google-key-1")


@pytest.fixture
async def certs():
    async with certificate_server([GOOGLE_KEY]) as server:
        yield server


@pytest.fixture
def settings(clean_database_url, tmp_path, certs):
    return make_settings(
        clean_database_url,
        tmp_path,
        queue="cloudtasks",
        email_queue="email-tasks",
        webhook_queue="hooks",
        webhook_queue_kind="pubsub",
        cloudtasks=CloudTasksSettings(project="test-project", location="here"),
        pubsub=PubSubSettings(project="test-project"),
        google_push=GooglePushSettings(
            service_account=SERVICE_ACCOUNT, audience=AUDIENCE, certs_url=certs.url
        ),
    )


def payload(reminder_id: str, channel: str = "email") -> bytes:
    body = {"v": 1, "reminder_id": reminder_id, "channel": channel, "schedule_version": 1}
    return orjson.dumps(body)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def task_headers(token: str) -> dict[str, str]:
    return bearer(token) | {"X-CloudTasks-TaskName": "t1", "X-CloudTasks-TaskRetryCount": "0"}


async def due_reminder(client, clock, reminder_id: str, channel: str = "email") -> None:
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/in")
    due = clock() - timedelta(minutes=1)
    await put_reminder(client, reminder_id, customer_id="c1", due_at=due, channels=(channel,))


async def test_a_cloudtasks_push_with_google_token_is_sent(client, clock, provider):
    """A Cloud Tasks push with a valid Google token is delivered once."""
    await due_reminder(client, clock, "r:ct")
    response = await client.post(
        "/push/email-tasks",
        content=payload("r:ct"),
        headers=task_headers(GOOGLE_KEY.mint(time.time())),
    )
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "sent"
    assert len(provider.calls) == 1


async def test_a_pubsub_push_on_the_webhook_queue_uses_the_pubsub_format(client, clock, provider):
    """The webhook queue is Pub/Sub: a wrapped message with a token is delivered."""
    await due_reminder(client, clock, "r:ps", "webhook")
    data = base64.b64encode(payload("r:ps", "webhook")).decode()
    body = orjson.dumps({"message": {"data": data, "messageId": "7"}, "subscription": "s"})
    response = await client.post(
        "/push/hooks", content=body, headers=bearer(GOOGLE_KEY.mint(time.time()))
    )
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "sent"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://other.example/push"},
        {"email": "intruder@test-project.iam.gserviceaccount.com"},
        {"email_verified": False},
        {"exp": int(time.time()) - 600, "iat": int(time.time()) - 4200},
        {"key": STRANGER_KEY},
    ],
    ids=["wrong-audience", "wrong-service-account", "unverified-email", "expired", "wrong-key"],
)
async def test_each_failed_token_check_answers_401_and_sends_nothing(
    client, clock, provider, claims
):
    """Wrong audience, service account, unverified email, expired, wrong key: 401 each."""
    await due_reminder(client, clock, "r:bad")
    key = claims.pop("key", GOOGLE_KEY)
    token = key.mint(time.time(), **claims)
    response = await client.post(
        "/push/email-tasks", content=payload("r:bad"), headers=task_headers(token)
    )
    assert response.status_code == 401, response.text
    assert provider.calls == []


async def test_pushes_answer_503_while_google_certificates_cannot_be_fetched(
    client, clock, provider, certs
):
    """Google's certificate endpoint answers 500: a Cloud Tasks and a Pub/Sub push with a good
    token answer 503 (retryable: the queue comes back) instead of 401, and nothing is sent."""
    certs.status = 500
    await due_reminder(client, clock, "r:ct")
    task = await client.post(
        "/push/email-tasks",
        content=payload("r:ct"),
        headers=task_headers(GOOGLE_KEY.mint(time.time())),
    )
    data = base64.b64encode(payload("r:ct", "webhook")).decode()
    body = orjson.dumps({"message": {"data": data, "messageId": "8"}, "subscription": "s"})
    message = await client.post(
        "/push/hooks", content=body, headers=bearer(GOOGLE_KEY.mint(time.time()))
    )
    for response in (task, message):
        assert response.status_code == 503, response.text
        assert response.json()["error"] == "authentication_unavailable"
    assert provider.calls == []


async def test_a_queue_of_another_kind_does_not_accept_this_format(client, clock):
    """An Infrai-signed push to a Google queue is not authentic there."""
    await due_reminder(client, clock, "r:x")
    response = await client.post("/push/email-tasks", content=payload("r:x"))
    assert response.status_code == 401


async def test_channels_of_different_kinds_get_a_routing_publisher(settings, clock):
    """Email via Cloud Tasks and webhooks via Pub/Sub: one publisher per queue, the
    horizon of the shortest (Pub/Sub: 0)."""
    container = build_container(settings, clock=clock)
    try:
        publisher = container.publisher
        assert isinstance(publisher, RoutingPublisher)
        assert {q: p.name for q, p in publisher.by_queue.items()} == {
            "email-tasks": "cloudtasks",
            "hooks": "pubsub",
        }
        assert publisher.max_delay_seconds == 0
        assert {q: f.name for q, f in container.push_formats.items()} == {
            "email-tasks": "cloudtasks",
            "hooks": "pubsub",
        }
    finally:
        await container.engine.dispose()
