"""The keys a serve sent, for a while: their duplicates are answered without the database.

``SentKeys`` is one process's memory. ``SharedSentKeys`` is the same memory for every worker
of one ``reminders serve``: a table in shared memory the supervisor creates before it starts
the workers. With several workers a queue's copy of a message reaches any of them, and
before, a copy reaching a worker that had not sent it cost a claim statement on the
database (half of the duplicates with two workers; bench/push.py).
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
import sys
from datetime import datetime
from hashlib import blake2b

from app.domain.ledger import LedgerKey

# How many sent keys a process keeps (``SentKeys``), ~130 bytes each, and for how long.
SENT_KEYS = 50_000
SENT_KEYS_SECONDS = 60.0
_ATTEMPT_BITS = 16  # a kept entry packs its expiry (ms) above the attempt that sent it
_ATTEMPT_MASK = (1 << _ATTEMPT_BITS) - 1


class SentKeys:
    """Keys this process sent, with their attempt: for a while, their duplicates (the hot
    "already sent" answer) are answered without a database round trip.

    Honest across replicas because a ``sent`` row never changes back: a redrive selects
    only dead and terminal rows (a redrive puts those back to pending under the same key,
    perhaps from another replica, so they are never kept), and a reschedule or cancel of a
    reminder whose every channel is final is refused. Only retention deletes a sent row,
    with its reminder, once both were unchanged for the retention period; then the id may
    be used again. So a key is kept only from this process's own committed finalize (its
    send time known) and for less than half the retention period
    (``seconds_for_retention``): it is gone before its row can be purged. Lost with the
    process (the database answers again); past ``size`` keys the oldest goes first.

    Compact, since it is full whenever deliveries run fast: a key is kept as a 128-bit
    digest of its idempotency key (two keys share one with a chance of ~2^-128 each) and
    its attempt and expiry as one int, ~130 bytes a key rather than ~300 as objects.
    """

    __slots__ = ("_kept", "_life_ms", "_size")

    def __init__(self, size: int = SENT_KEYS, seconds: float = SENT_KEYS_SECONDS) -> None:
        self._size = size
        self._life_ms = round(seconds * 1000)
        self._kept: dict[int, int] = {}

    @staticmethod
    def seconds_for_retention(retention_days: float) -> float:
        """How long a key may be kept under a retention period (0 days: rows are kept)."""
        if retention_days <= 0:
            return SENT_KEYS_SECONDS
        return min(SENT_KEYS_SECONDS, retention_days * 86400 / 2)

    def get(self, key: LedgerKey, now: datetime) -> int | None:
        """The attempt that sent ``key``, while this process may still vouch for it."""
        digest = int.from_bytes(_digest(key))
        kept = self._kept.get(digest)
        if kept is None:
            return None
        attempt = _vouched(kept, now)
        if attempt is None:
            del self._kept[digest]
        return attempt

    def add(self, key: LedgerKey, attempt: int, *, sent_at: datetime) -> None:
        """Remember that ``attempt`` sent ``key`` at ``sent_at`` (its finalize committed)."""
        if self._size <= 0 or not 0 <= attempt <= _ATTEMPT_MASK:
            return  # nothing kept: the database answers
        digest = int.from_bytes(_digest(key))
        if len(self._kept) >= self._size and digest not in self._kept:
            del self._kept[next(iter(self._kept))]  # insertion order: the oldest
        self._kept[digest] = _packed(attempt, sent_at, self._life_ms)


def _digest(key: LedgerKey) -> bytes:
    return blake2b(key.idempotency_key.encode(), digest_size=16).digest()


def _packed(attempt: int, sent_at: datetime, life_ms: int) -> int:
    # A kept key's expiry (ms) above the attempt that sent it, as one int (or one word).
    return (_milliseconds(sent_at) + life_ms) << _ATTEMPT_BITS | attempt


def _vouched(packed: int, now: datetime) -> int | None:
    """The attempt of a kept key, None once it expired."""
    return None if _milliseconds(now) >= packed >> _ATTEMPT_BITS else packed & _ATTEMPT_MASK


def _milliseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class SharedSentKeys:
    """``SentKeys`` in a table every worker of one serve maps: what one worker sent, the
    others answer from memory too. The same rules keep a key (only from a committed finalize
    of this serve, for ``seconds``), so the same reasons make it honest.

    The table is a hash table of 4-slot buckets. A slot is the key's 128-bit digest, its
    expiry and attempt packed as in ``SentKeys``, and a check word over the three. Workers
    write without a lock: two writes to one slot at once, or a read during a write, can
    leave or see a slot whose words come from different writes, and its check then fails
    (but with a chance of 2^-64), so it counts as empty: the database answers. A full bucket
    gives up the slot that expires first. Lost with the serve, as ``SentKeys`` is.
    """

    __slots__ = ("_buckets", "_life_ms", "_table")

    def __init__(self, table: mmap.mmap, seconds: float = SENT_KEYS_SECONDS) -> None:
        self._table = table
        self._buckets = len(table) // _BUCKET.size
        self._life_ms = round(seconds * 1000)

    def get(self, key: LedgerKey, now: datetime) -> int | None:
        """The attempt that sent ``key``, while this serve may still vouch for it."""
        high, low, _, slots = self._bucket(key)
        index = _slot_of(slots, high, low)
        if index is None:
            return None
        packed = slots[index + 2]
        if slots[index + 3] != _check(high, low, packed):
            return None  # being written: the database answers
        return _vouched(packed, now)

    def add(self, key: LedgerKey, attempt: int, *, sent_at: datetime) -> None:
        """Remember that ``attempt`` sent ``key`` at ``sent_at`` (its finalize committed)."""
        if not 0 <= attempt <= _ATTEMPT_MASK:
            return  # nothing kept: the database answers
        high, low, bucket, slots = self._bucket(key)
        index = _slot_of(slots, high, low)
        if index is None:
            index = _soonest_to_expire(slots)
        packed = _packed(attempt, sent_at, self._life_ms)
        offset = bucket + index // 4 * _SLOT.size
        _SLOT.pack_into(self._table, offset, high, low, packed, _check(high, low, packed))

    def _bucket(self, key: LedgerKey) -> tuple[int, int, int, tuple[int, ...]]:
        """The key's digest halves, its bucket's offset and the bucket's words."""
        high, low = _HALVES.unpack(_digest(key))
        offset = (low % self._buckets) * _BUCKET.size
        return high, low, offset, _BUCKET.unpack_from(self._table, offset)


def _slot_of(slots: tuple[int, ...], high: int, low: int) -> int | None:
    """The index of the first word of the key's slot in its bucket, if it has one."""
    for index in range(0, len(slots), 4):
        if slots[index] == high and slots[index + 1] == low:
            return index
    return None


def _soonest_to_expire(slots: tuple[int, ...]) -> int:
    """The slot a new key takes: an empty or torn one (expiring at 0), else the soonest."""

    def expiry(index: int) -> int:
        high, low, packed, check = slots[index : index + 4]
        return packed >> _ATTEMPT_BITS if check == _check(high, low, packed) else 0

    return min(range(0, len(slots), 4), key=expiry)


def _check(high: int, low: int, packed: int) -> int:
    # Never 0 for a slot never written (all zero bytes); for words of different writes,
    # equal to their check word with a chance of 2^-64 (the digests are uniformly random).
    return high ^ low ^ packed ^ _CHECK_SALT


# The shared table: 32,768 buckets of 4 slots of 32 bytes, 4 MiB, ~130,000 keys; a worker
# touches its pages as keys arrive, as SentKeys' 50,000 keys took ~6.5 MB in each worker.
_SLOT = struct.Struct("<4Q")
_BUCKET = struct.Struct("<16Q")
_HALVES = struct.Struct("<2Q")
_CHECK_SALT = 0x9E3779B97F4A7C15
TABLE_BYTES = 32_768 * _BUCKET.size

# Where a worker finds the table: ``/proc/<supervisor>/fd/<n>``, set by ``share_with_workers``.
SHARED_TABLE = "_REMINDERS_SERVE_SENT_KEYS"


def share_with_workers() -> None:
    """In ``serve`` before it becomes the supervisor of several workers: create the table
    (an anonymous memory file, Linux) and tell the workers where it is. Elsewhere each
    worker keeps its own keys, as before."""
    if not sys.platform.startswith("linux") or not hasattr(os, "memfd_create"):
        return
    try:
        fd = os.memfd_create("reminders-sent-keys", 0)  # 0: inherited across exec
        os.ftruncate(fd, TABLE_BYTES)
    except OSError:
        return
    os.environ[SHARED_TABLE] = f"/proc/{os.getpid()}/fd/{fd}"  # exec keeps the process id


def sent_keys(seconds: float) -> SentKeys | SharedSentKeys:
    """This process's memory of sent keys: the serve's shared table when it has one."""
    table = _shared_table()
    return SentKeys(seconds=seconds) if table is None else SharedSentKeys(table, seconds)


@functools.cache
def _shared_table() -> mmap.mmap | None:
    return _attach(os.environ.get(SHARED_TABLE))  # once per process


def _attach(path: str | None) -> mmap.mmap | None:
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # the supervisor is gone, or /proc is not ours to read: keep our own
        return None
    try:
        if os.fstat(fd).st_size != TABLE_BYTES:
            return None
        return mmap.mmap(fd, TABLE_BYTES)
    finally:
        os.close(fd)
