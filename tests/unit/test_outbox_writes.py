"""The outbox's durable (fsync'd) writes: concurrent sends share one thread hand-off, each
file is complete under its own name, and one file that cannot be written fails only its
own send."""

from __future__ import annotations

import asyncio
import email
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.adapters.channels import outbox as outbox_module
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


def counting(monkeypatch, name: str, real):
    """Replace outbox's ``name`` by ``real`` that also counts its calls."""
    calls: list[object] = []

    def wrapper(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(f"app.adapters.channels.outbox.{name}", wrapper)
    return calls


@pytest.mark.skipif(outbox_module._SYNCFS is None, reason="syncfs needs Linux 5.8 or later")
def test_a_batch_flushes_its_data_with_one_syncfs_not_an_fsync_per_file(tmp_path, monkeypatch):
    syncfs_calls = counting(monkeypatch, "_SYNCFS", outbox_module._SYNCFS)
    fsync_calls = counting(monkeypatch, "os.fsync", os.fsync)
    files = [(tmp_path / "email" / f"{n}.eml", b"%d" % n) for n in range(30)]
    files += [(tmp_path / "webhook" / f"{n}.json", b"{}") for n in range(5)]
    assert _write_durably(files) == [None] * 35
    assert len(syncfs_calls) == 1  # both folders are on one file system
    assert len(fsync_calls) == 2  # one per folder, for the renames; none per file
    assert (tmp_path / "email" / "29.eml").read_bytes() == b"29"
    assert not list(tmp_path.glob("*/.tmp-*"))


def test_where_syncfs_fails_each_file_is_fsynced_and_a_failure_is_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(outbox_module, "_SYNCFS", lambda fd: -1)
    real_fsync = os.fsync
    flushed: list[str] = []

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(("email", "webhook")):
            return real_fsync(fd)  # a folder, after the renames
        flushed.append(name)
        if len(flushed) == 2:
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    files = [(tmp_path / "email" / f"{n}.eml", b"%d" % n) for n in range(3)]
    first, second, third = _write_durably(files)
    assert len(flushed) == 3
    assert first is None and third is None and isinstance(second, OSError)
    assert sorted(p.name for p in (tmp_path / "email").iterdir()) == ["0.eml", "2.eml"]


def test_a_folder_that_cannot_be_opened_for_syncfs_falls_back_to_an_fsync_per_file(
    tmp_path, monkeypatch
):
    real_open = os.open

    def no_folders(path, flags, *args):
        if os.path.isdir(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_folders)
    files = [(tmp_path / "email" / f"{n}.eml", b"%d" % n) for n in range(3)]
    assert _write_durably(files) == [None, None, None]  # flushed file by file instead
    assert (tmp_path / "email" / "2.eml").read_bytes() == b"2"


async def test_a_disk_that_stops_answering_ends_the_send_at_its_timeout(tmp_path: Path):
    """The durable write waits for a thread; a disk that never answers is a transient
    ``outbox_io`` failure once the send's timeout passes, not a send that waits forever."""
    provider = outbox(tmp_path)
    never = asyncio.Event()

    async def stalled(files):
        await never.wait()

    provider._files._run_batch = stalled  # the thread that writes never comes back
    with pytest.raises(TransientProviderError) as raised:
        await provider.send(an_email(1), idempotency_key="r1:email", timeout=0.05)
    assert raised.value.detail_class == "outbox_io"


def test_a_temporary_name_a_dead_process_left_is_skipped_not_reused(tmp_path, monkeypatch):
    """Temporary names are this process's id and a counter: one a previous process of the
    same id left behind (a crash between create and rename) is refused by ``O_EXCL``, kept
    as it is, and the next number is used."""
    monkeypatch.setattr(outbox_module, "_TEMP_NUMBERS", iter(range(10)))
    (tmp_path / "email").mkdir()
    stale = [tmp_path / "email" / f".tmp-{os.getpid()}-{n}" for n in range(2)]
    for leftover in stale:
        leftover.write_bytes(b"a previous life's half-written message")
    assert _write_durably([(tmp_path / "email" / "a.eml", b"whole")]) == [None]
    assert (tmp_path / "email" / "a.eml").read_bytes() == b"whole"
    assert all(leftover.read_bytes().startswith(b"a previous life") for leftover in stale)


def test_a_short_write_goes_on_until_the_whole_message_is_written(tmp_path, monkeypatch):
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:7]))
    content = b"Subject: a message longer than one short write\r\n\r\nbody\r\n"
    assert _write_durably([(tmp_path / "email" / "a.eml", content)]) == [None]
    assert (tmp_path / "email" / "a.eml").read_bytes() == content
