"""A real local provider: writes each rendered message to a directory, atomically.

Email becomes an RFC 5322 ``.eml`` file, a webhook a ``.json`` file. The file name
derives from the idempotency key, so a resend after a crash overwrites the same
file instead of producing a second message: the outbox deduplicates like a
provider that honours idempotency keys.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import itertools
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from app.domain.clock import utc_now
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult
from app.group_commit import GroupCommit

from .eml import email_bytes

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

# One file to write: where, and what.
_File = tuple[Path, bytes]


def file_stem(idempotency_key: str) -> str:
    """A safe, unique file name for a key: readable prefix plus a short hash."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:12]
    return f"{_UNSAFE.sub('_', idempotency_key)[:120]}.{digest}"


class OutboxProvider:
    """Writes messages under ``directory/<channel>/``; each write is temp file + rename."""

    name = "outbox"
    # A repeat with the same idempotency key is dropped by the provider (send_attempts).
    deduplicates = True

    def __init__(
        self,
        directory: Path,
        *,
        fsync: bool = True,
        sender: str = "reminders@localhost",
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.directory = directory
        self.fsync = fsync
        self.sender = sender
        self.clock = clock  # the email's Date header
        # Concurrent sends' fsync'd files share one thread hand-off (and their disk flushes):
        # a thread per file cost more CPU on the event loop than the write itself.
        self._files = GroupCommit(self._write_batch, key=lambda file: file[0], max_batch=64)

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """Write the message file; return its path relative to the outbox as the request id."""
        if not message.recipient:
            raise PermanentProviderError("no recipient", detail_class="no_recipient")
        if message.channel == "email":
            content = email_bytes(
                message, idempotency_key=idempotency_key, sender=self.sender, now=self.clock()
            )
            suffix = ".eml"
        else:
            content = json.dumps(
                {"url": message.recipient, "headers": dict(message.headers), "body": message.body},
                indent=2,
                sort_keys=True,
            ).encode()
            suffix = ".json"
        relative = Path(message.channel) / f"{file_stem(idempotency_key)}{suffix}"
        try:
            await self._write(self.directory / relative, content, timeout)
        except (OSError, TimeoutError) as error:
            raise TransientProviderError(
                f"outbox write failed: {type(error).__name__}", detail_class="outbox_io"
            ) from error
        return SendResult(provider_request_id=str(relative))

    async def _write(self, path: Path, content: bytes, timeout: float) -> None:
        if not self.fsync:
            # Without fsync the write ends in the page cache: its cost is CPU (user and
            # kernel), which a thread cannot hide on a busy machine, and the hand-off costs
            # more. Measured in bench/push.py: -25% CPU per delivery inline.
            _replace(*_write_temp(path, content, fsync=False))
            return
        # fsync waits for the disk: off the event loop, bounded by the provider timeout
        # (``asyncio.timeout``: wait_for wrapped each send in a task of its own).
        async with asyncio.timeout(timeout):
            await self._files.submit((path, content))

    async def _write_batch(self, files: Sequence[_File]) -> list[BaseException | None]:
        return await asyncio.to_thread(_write_durably, files)


def _write_durably(files: Sequence[_File]) -> list[BaseException | None]:
    """Write each file atomically and durably: every file's data flushed before its rename,
    the renames flushed with their folders. One failed file fails only itself.

    The data of the whole batch is flushed at once (``_flush_data``): one flush of the file
    system instead of one fsync per file, which the disk takes several times faster
    (``bench/fsync_ceiling.py``)."""
    results: list[BaseException | None] = []
    temps: list[tuple[int, str, Path]] = []  # (index in results, temporary name, path)
    for path, content in files:
        try:
            temp_name, _ = _write_temp(path, content, fsync=False)
        except OSError as error:
            results.append(error)
            continue
        temps.append((len(results), temp_name, path))
        results.append(None)
    for (index, temp_name, path), unflushed in zip(temps, _flush_data(temps), strict=True):
        results[index] = unflushed or _rename(temp_name, path)
    for folder in {path.parent for index, _, path in temps if results[index] is None}:
        _fsync_folder(folder)
    return results


def _flush_data(temps: Sequence[tuple[int, str, Path]]) -> list[OSError | None]:
    """Make the temporary files' data durable: one ``syncfs`` per file system where the
    kernel reports its writeback errors, otherwise (or if it fails) an fsync per file, so
    each error belongs to its own file. A file that could not be flushed is removed."""
    if temps and _syncfs_each({path.parent for _, _, path in temps}):
        return [None] * len(temps)
    errors: list[OSError | None] = []
    for _, temp_name, _ in temps:
        try:
            _fsync_path(temp_name)
            errors.append(None)
        except OSError as error:
            Path(temp_name).unlink(missing_ok=True)
            errors.append(error)
    return errors


def _syncfs_each(folders: set[Path]) -> bool:
    """``syncfs`` on the file system of each folder; False where it is not to be trusted."""
    if _SYNCFS is None:
        return False
    devices: dict[int, Path] = {}
    for folder in folders:
        try:
            devices.setdefault(os.stat(folder).st_dev, folder)
        except OSError:
            return False
    for folder in devices.values():
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            return False
        try:
            if _SYNCFS(fd) != 0:
                return False
        finally:
            os.close(fd)
    return True


def _linux_syncfs() -> Callable[[int], int] | None:
    # syncfs reports writeback errors since Linux 5.8; before that it flushed and said
    # nothing, so an fsync per file is the only way to learn a write failed.
    if sys.platform != "linux":
        return None
    try:
        version = tuple(int(part) for part in platform.release().split(".")[:2])
        function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (ValueError, OSError, AttributeError):
        return None
    return function if version >= (5, 8) else None


_SYNCFS = _linux_syncfs()


def _fsync_path(name: str) -> None:
    fd = os.open(name, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rename(temp_name: str, path: Path) -> OSError | None:
    try:
        _replace(temp_name, path)
    except OSError as error:
        return error
    return None


def _write_temp(path: Path, content: bytes, *, fsync: bool) -> tuple[str, Path]:
    """``content`` in a new temporary file beside ``path``; its name and ``path``."""
    try:
        fd, temp_name = _create_temp(path.parent)
    except FileNotFoundError:  # the channel's first message: create its folder (once)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = _create_temp(path.parent)
    try:
        written = 0
        while written < len(content):  # a short write (a signal, a full disk) goes on
            written += os.write(fd, content[written:])  # [0:] of bytes is no copy
        if fsync:
            os.fsync(fd)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return temp_name, path


# Temporary names: this process's id and a counter. ``O_EXCL`` refuses a name a dead process
# of the same id left behind, and the next number is tried. ``tempfile.mkstemp`` drew a
# random name each time and wrapped the descriptor in a buffered file object: ~10 µs of CPU
# per message more (bench/README.md, "2026-12-07, fourth session").
_TEMP_NUMBERS = itertools.count()
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create_temp(folder: Path) -> tuple[int, str]:
    for _ in range(100):
        name = f"{folder}/.tmp-{os.getpid()}-{next(_TEMP_NUMBERS)}"
        try:
            return os.open(name, _TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def _replace(temp_name: str, path: Path) -> None:
    try:
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _fsync_folder(folder: Path) -> None:
    # A rename is durable once its folder is: one flush covers every file of the batch.
    # A failure here leaves files written but their names maybe not yet on disk, as
    # before this flush existed; the send stands (the file is there to read).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
