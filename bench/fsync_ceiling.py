"""The disk's ceiling for the outbox: durable files per second, as the outbox writes them.

The outbox provider (the default channel provider) writes the files of concurrent sends as
one batch (up to 64): each to a temporary file, the batch's data flushed with one
``syncfs`` (Linux 5.8 or later; elsewhere an fsync per file), then renamed into place and
the folder fsynced. Whatever the service does, end to end on the defaults cannot deliver
email faster than the disk takes such files. This measures that ceiling on the machine at
hand: ``batch`` runs the outbox's own writer (``outbox._write_durably``) on batches of
``--batch`` files, from one thread as the outbox does; ``fsync`` writes each file with an
fsync of its own (the fallback, and the outbox before 2026-12-03), from several threads at
once (fsyncs from several threads may share the file system's journal commits).

    .venv/bin/python bench/fsync_ceiling.py [--files 2000] [--dir PATH] [--threads 1,2,4,8]
                                            [--batch 64]

Prints files/s and the CPU (user, kernel) per file for each way.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app.adapters.channels.outbox import _SYNCFS, _write_durably

BODY = b"x" * 1500  # about one rendered weekly digest as an .eml file


def write_durably(folder: Path, n: int) -> None:
    """One outbox file: temporary file, write, fsync, rename."""
    fd, temp_name = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        os.write(fd, BODY)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp_name, folder / f"{n}.eml")


def measure(folder: Path, files: int, threads: int) -> tuple[float, float, float]:
    """Files per second and user, kernel microseconds per file, an fsync per file."""
    return timed(folder, files, lambda: fsync_each(folder, files, threads))


def fsync_each(folder: Path, files: int, threads: int) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: write_durably(folder, n), range(files)))
    folder_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def in_batches(folder: Path, files: int, batch: int) -> None:
    """The outbox's own writer, ``batch`` files at a time."""
    for start in range(0, files, batch):
        paths = [folder / f"{n}.eml" for n in range(start, min(start + batch, files))]
        errors = [error for error in _write_durably([(p, BODY) for p in paths]) if error]
        if errors:
            raise errors[0]


def timed(folder: Path, files: int, write: Callable[[], None]) -> tuple[float, float, float]:
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    write()
    elapsed, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    for path in folder.iterdir():
        path.unlink()
    per = 1e6 / files
    return (
        files / elapsed,
        (after.ru_utime - before.ru_utime) * per,
        (after.ru_stime - before.ru_stime) * per,
    )


def main() -> None:
    """Parse arguments, measure each thread count, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--threads", default="1,2,4,8")
    parser.add_argument("--batch", type=int, default=64, help="files per outbox batch")
    args = parser.parse_args()
    flush = "one syncfs" if _SYNCFS else "an fsync per file: no syncfs here"
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        folder = Path(name)
        print(f"{'way':<22} {'files/s':>8} {'user µs':>8} {'kernel µs':>9}  ({folder})")
        rate, user, kernel = timed(
            folder, args.files, lambda: in_batches(folder, args.files, args.batch)
        )
        print(f"{'batch of ' + str(args.batch):<22} {rate:>8.0f} {user:>8.0f} {kernel:>9.0f}"
              f"  (the outbox: {flush} per batch)")  # fmt: skip
        for threads in (int(t) for t in args.threads.split(",")):
            rate, user, kernel = measure(folder, args.files, threads)
            way = f"fsync each, {threads} thr."
            print(f"{way:<22} {rate:>8.0f} {user:>8.0f} {kernel:>9.0f}")


if __name__ == "__main__":
    main()
