"""The contract every channel provider passes (``CHANNEL_FACTORIES``), and the outbox's own.

What the receiver relies on: a provider request id for the ledger, no second message for a
resend under the same idempotency key (the one irreducible gap: provider accepted, we died
before finalize), and a permanent error when there is nobody to send to.
"""

import dataclasses
import email
import json
import os

import pytest

from app.adapters.channels import outbox as outbox_module
from app.adapters.channels.outbox import OutboxProvider, file_stem
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import SendResult
from tests.contract.channels import (
    CHANNEL_FACTORIES,
    OUTBOX_EMAIL,
    OUTBOX_WEBHOOK,
    ChannelEnv,
)

pytestmark = pytest.mark.anyio

KEY = "digest:c1:2026-W33:email:provider"


@pytest.fixture(params=CHANNEL_FACTORIES, ids=lambda case: case.name)
async def channel(request, clock, tmp_path):
    """One provider under test with its far side."""
    async with request.param.factory(ChannelEnv(clock=clock, tmp_path=tmp_path)) as under_test:
        yield under_test


async def test_send_returns_a_provider_request_id(channel):
    """An accepted send returns a SendResult whose request id fits the ledger column."""
    result = await channel.provider.send(channel.message, idempotency_key=KEY, timeout=5)
    assert isinstance(result, SendResult)
    assert isinstance(result.provider_request_id, str)
    assert 0 < len(result.provider_request_id) <= 255
    assert len(await channel.delivered()) == 1


async def test_resend_with_the_same_key_is_not_a_second_message(channel):
    """Resending under the same idempotency key shows the customer one message, not two."""
    await channel.provider.send(channel.message, idempotency_key=KEY, timeout=5)
    await channel.provider.send(channel.message, idempotency_key=KEY, timeout=5)
    delivered = await channel.delivered()
    assert len(set(delivered)) == 1


async def test_another_key_is_another_message(channel):
    """A different idempotency key is a different message."""
    await channel.provider.send(channel.message, idempotency_key=KEY, timeout=5)
    await channel.provider.send(channel.message, idempotency_key=KEY + ":2", timeout=5)
    assert len(set(await channel.delivered())) == 2


async def test_missing_recipient_is_a_permanent_error(channel):
    """No address or URL: PermanentProviderError (terminal, never retried), nothing sent."""
    nobody = dataclasses.replace(channel.message, recipient="")
    with pytest.raises(PermanentProviderError):
        await channel.provider.send(nobody, idempotency_key=KEY, timeout=5)
    assert await channel.delivered() == []


# --- The outbox's own guarantees. ---


def visible(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_outbox_file_appears_whole_under_its_final_name(tmp_path, monkeypatch):
    """The content is complete in a hidden temp file before one rename makes it visible."""
    provider = OutboxProvider(tmp_path, fsync=True)
    folder = tmp_path / "email"
    final = folder / f"{file_stem(KEY)}.eml"
    seen = []
    real_replace = os.replace

    def observing_replace(source, destination):
        source, destination = os.fspath(source), os.fspath(destination)
        seen.append(
            {
                "final_exists": os.path.exists(destination),
                "visible": [n for n in visible(folder) if not n.startswith(".")],
                "temp_is_hidden": os.path.basename(source).startswith("."),
                "same_directory": os.path.dirname(source) == os.path.dirname(destination),
                "temp_content": open(source, "rb").read(),  # noqa: SIM115
            }
        )
        real_replace(source, destination)

    monkeypatch.setattr(outbox_module.os, "replace", observing_replace)
    result = await provider.send(OUTBOX_EMAIL, idempotency_key=KEY, timeout=5)
    [moment] = seen
    assert moment["final_exists"] is False
    assert moment["visible"] == []  # nothing partial was ever visible under a real name
    assert moment["temp_is_hidden"] and moment["same_directory"]
    assert moment["temp_content"] == final.read_bytes()  # complete before the rename
    assert visible(folder) == [final.name]  # no temp file left behind
    assert result.provider_request_id == f"email/{final.name}"


async def test_outbox_failed_write_leaves_nothing_and_is_transient(tmp_path, monkeypatch):
    """A write that fails (disk full, rename refused) leaves no file and is retried later."""
    provider = OutboxProvider(tmp_path, fsync=False)

    def failing_replace(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outbox_module.os, "replace", failing_replace)
    with pytest.raises(TransientProviderError):
        await provider.send(OUTBOX_EMAIL, idempotency_key=KEY, timeout=5)
    assert visible(tmp_path / "email") == []


async def test_outbox_resend_overwrites_the_same_file_with_the_same_message_id(tmp_path):
    """A resend after a crash rewrites one file; its Message-ID is stable per key."""
    provider = OutboxProvider(tmp_path, fsync=False)
    first = await provider.send(OUTBOX_EMAIL, idempotency_key=KEY, timeout=5)
    path = tmp_path / first.provider_request_id
    message_id = email.message_from_bytes(path.read_bytes())["Message-ID"]
    second = await provider.send(OUTBOX_EMAIL, idempotency_key=KEY, timeout=5)
    assert second.provider_request_id == first.provider_request_id
    assert visible(tmp_path / "email") == [path.name]
    assert email.message_from_bytes(path.read_bytes())["Message-ID"] == message_id


async def test_outbox_email_is_a_complete_rfc5322_message(tmp_path):
    """The .eml file parses with From, To, Subject, a text part and the HTML alternative."""
    provider = OutboxProvider(tmp_path, fsync=False, sender="reminders@relay.example")
    result = await provider.send(OUTBOX_EMAIL, idempotency_key=KEY, timeout=5)
    parsed = email.message_from_bytes((tmp_path / result.provider_request_id).read_bytes())
    assert parsed["From"] == "reminders@relay.example"
    assert parsed["To"] == "ada@example.com"
    assert parsed["Subject"] == "Your weekly digest"
    parts = {part.get_content_type(): part for part in parsed.walk()}
    assert "Hello Ada" in parts["text/plain"].get_payload(decode=True).decode()
    assert "<p>Hello Ada</p>" in parts["text/html"].get_payload(decode=True).decode()


async def test_outbox_webhook_is_json_with_url_and_body(tmp_path):
    """A webhook becomes a .json file holding the target URL and the body."""
    provider = OutboxProvider(tmp_path, fsync=False)
    result = await provider.send(OUTBOX_WEBHOOK, idempotency_key=KEY, timeout=5)
    assert result.provider_request_id.endswith(".json")
    written = json.loads((tmp_path / result.provider_request_id).read_text())
    assert written["url"] == "https://hooks.example.com/ada"
    assert written["body"] == {"type": "reminder.weekly_digest"}


@pytest.mark.parametrize("key", ["../../etc/passwd", "/abs/path", "a/../../b", "..", "x" * 500])
async def test_outbox_hostile_keys_stay_inside_the_directory(tmp_path, key):
    """Whatever the key, the file lands directly in outbox/<channel>/ with a bounded name."""
    outbox_dir = tmp_path / "outbox"
    provider = OutboxProvider(outbox_dir, fsync=False)
    result = await provider.send(OUTBOX_EMAIL, idempotency_key=key, timeout=5)
    written = (outbox_dir / result.provider_request_id).resolve()
    assert written.parent == (outbox_dir / "email").resolve()
    assert len(written.name) < 255
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outbox"]
