"""The outbox's durable (fsync'd) writes: concurrent sends share one thread hand-off, each
file is complete under its own name, and one file that cannot be written fails only its
own send."""

from __future__ import annotations

import asyncio
import email
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.adapters.channels.outbox import OutboxProvider, _write_durably
from app.domain.errors import TransientProviderError
from app.domain.messages import RenderedMessage

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def an_email(n: int) -> RenderedMessage:
    return RenderedMessage("email", f"user{n}@example.com", subject=f"Digest {n}", text=f"n={n}")


def a_webhook(n: int) -> RenderedMessage:
    return RenderedMessage("webhook", "https://hooks.example.com/in", body={"n": n})


def outbox(tmp_path: Path) -> OutboxProvider:
    return OutboxProvider(tmp_path, fsync=True, clock=lambda: NOW)


async def test_concurrent_sends_share_thread_hand_offs_and_each_file_is_whole(tmp_path):
    provider = outbox(tmp_path)
    results = await asyncio.gather(
        *(provider.send(an_email(n), idempotency_key=f"r{n}:email", timeout=10) for n in range(40))
    )
    assert provider._files.statements < 40 / 4  # before: a thread per file
    for n, result in enumerate(results):
        parsed = email.message_from_bytes((tmp_path / result.provider_request_id).read_bytes())
        assert (parsed["To"], parsed["Subject"]) == (f"user{n}@example.com", f"Digest {n}")
    assert not list((tmp_path / "email").glob(".tmp-*"))  # no temporary file left behind
    assert len(list((tmp_path / "email").glob("*.eml"))) == 40


async def test_a_file_that_cannot_be_written_fails_only_its_own_send(tmp_path):
    provider = outbox(tmp_path)
    (tmp_path / "email").write_text("a file where the email folder should be")
    email_send = provider.send(an_email(1), idempotency_key="r1:email", timeout=10)
    webhook_send = provider.send(a_webhook(1), idempotency_key="r1:webhook", timeout=10)
    failed, written = await asyncio.gather(email_send, webhook_send, return_exceptions=True)
    assert isinstance(failed, TransientProviderError) and failed.detail_class == "outbox_io"
    assert (tmp_path / written.provider_request_id).is_file()


def test_in_one_batch_a_failed_file_fails_only_itself(tmp_path):
    (tmp_path / "blocked").write_text("not a folder")
    files = [(tmp_path / "blocked" / "a.eml", b"a"), (tmp_path / "open" / "b.eml", b"b")]
    failed, written = _write_durably(files)
    assert isinstance(failed, NotADirectoryError) and written is None
    assert (tmp_path / "open" / "b.eml").read_bytes() == b"b"


async def test_a_resend_with_the_same_key_replaces_the_file(tmp_path):
    provider = outbox(tmp_path)
    first, second = await asyncio.gather(
        provider.send(an_email(1), idempotency_key="r1:email", timeout=10),
        provider.send(an_email(2), idempotency_key="r1:email", timeout=10),
    )
    assert first == second
    assert provider._files.statements == 2  # one path is never in a batch twice
    assert [p.name for p in (tmp_path / "email").iterdir()] == [
        Path(first.provider_request_id).name
    ]
