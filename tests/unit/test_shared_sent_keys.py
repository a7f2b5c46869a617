"""The sent keys every worker of one serve shares (``SharedSentKeys``): what one process
wrote another reads, under the same rules as one process's ``SentKeys``; a slot whose words
come from different writes is never taken for a key; a full bucket gives up the slot that
expires first."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.ledger import LedgerKey
from app.services import sent_keys as module
from app.services.sent_keys import TABLE_BYTES, SharedSentKeys

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
KEY = LedgerKey("r1", "email", "outbox")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the table is an anonymous memory file (Linux)"
)


def one_bucket() -> mmap.mmap:
    """A table of a single bucket: every key lands in it."""
    return mmap.mmap(-1, module._BUCKET.size)


def test_a_key_another_process_sent_is_answered_here_until_it_expires(monkeypatch):
    """``share_with_workers`` makes the table; a real second process (as a worker would)
    attaches through the path it was given and adds a key; this process reads it."""
    monkeypatch.delenv(module.SHARED_TABLE, raising=False)
    module.share_with_workers()
    path = os.environ.pop(module.SHARED_TABLE)
    worker = (
        "from datetime import datetime; from app.domain.ledger import LedgerKey\n"
        "from app.services.sent_keys import sent_keys, SharedSentKeys\n"
        "kept = sent_keys(60.0); assert isinstance(kept, SharedSentKeys), kept\n"
        f"sent_at = datetime.fromisoformat('{NOW.isoformat()}')\n"
        "kept.add(LedgerKey('r1', 'email', 'outbox'), 3, sent_at=sent_at)\n"
    )  # fmt: skip
    env = {**os.environ, module.SHARED_TABLE: path}
    subprocess.run([sys.executable, "-c", worker], env=env, check=True, timeout=60)
    here = SharedSentKeys(module._attach(path), seconds=60)
    os.close(int(path.rsplit("/", 1)[1]))  # the table stays mapped; our descriptor goes
    assert here.get(KEY, NOW + timedelta(seconds=59)) == 3
    assert here.get(KEY, NOW + timedelta(seconds=60)) is None  # expired
    assert here.get(LedgerKey("r1", "email", "other"), NOW) is None  # another provider's send
    assert here.get(LedgerKey("r2", "email", "outbox"), NOW) is None


def test_without_a_table_each_process_keeps_its_own(monkeypatch):
    monkeypatch.delenv(module.SHARED_TABLE, raising=False)
    module._shared_table.cache_clear()
    assert isinstance(module.sent_keys(60.0), module.SentKeys)
    monkeypatch.setenv(module.SHARED_TABLE, "/proc/1/fd/999999")  # gone: keep our own
    module._shared_table.cache_clear()
    assert isinstance(module.sent_keys(60.0), module.SentKeys)
    module._shared_table.cache_clear()


def test_a_table_never_written_knows_no_key_and_an_attempt_too_large_is_not_kept():
    kept = SharedSentKeys(mmap.mmap(-1, TABLE_BYTES), seconds=60)
    assert kept.get(KEY, NOW) is None
    kept.add(KEY, 70_000, sent_at=NOW)  # cannot be packed: left to the database
    assert kept.get(KEY, NOW) is None
    kept.add(KEY, 2, sent_at=NOW)
    kept.add(KEY, 5, sent_at=NOW)  # the same key again: its slot, not a second one
    assert kept.get(KEY, NOW) == 5
    assert bytes(kept._table).count(module._digest(KEY)) == 1


def test_a_slot_whose_words_come_from_two_writes_is_not_a_key():
    """Workers write without a lock: a slot half written by one and half by another (or
    read while written) fails its check and is treated as empty."""
    table = one_bucket()
    kept = SharedSentKeys(table, seconds=60)
    other = LedgerKey("r2", "email", "outbox")
    kept.add(KEY, 1, sent_at=NOW)
    kept.add(other, 1, sent_at=NOW + timedelta(milliseconds=7))
    first, second = table[0:32], table[32:64]
    table[0:32] = first[:8] + second[8:]  # KEY's high half, the rest the other key's
    table[32:64] = second[:16] + first[16:]  # the other key's digest, KEY's packed and check
    assert kept.get(KEY, NOW) is None
    assert kept.get(other, NOW) is None
    kept.add(LedgerKey("r3", "email", "outbox"), 1, sent_at=NOW + timedelta(seconds=30))
    assert table[0:32] != first[:8] + second[8:]  # a torn slot is free: written over first


def test_a_full_bucket_gives_up_the_slot_that_expires_first():
    kept = SharedSentKeys(one_bucket(), seconds=60)
    keys = [LedgerKey(f"r{n}", "email", "outbox") for n in range(5)]
    for n, key in enumerate(keys[:4]):
        kept.add(key, 1, sent_at=NOW + timedelta(seconds=(n + 2) % 4))  # r2 sent first
    kept.add(keys[4], 1, sent_at=NOW + timedelta(seconds=10))
    assert [kept.get(key, NOW) for key in keys] == [1, 1, None, 1, 1]
