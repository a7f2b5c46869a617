"""The disk's ceiling for the outbox: durable files per second, as the outbox writes them.

The outbox provider (the default channel provider) writes each message to a temporary file,
fsyncs it, renames it into place and fsyncs the folder once per batch. Whatever the service
does, end to end on the defaults cannot deliver email faster than the disk takes such files;
this measures that ceiling on the machine at hand, alone and from several threads at once
(the outbox hands each batch to a thread; fsyncs from several threads may share the file
system's journal commits).

    .venv/bin/python bench/fsync_ceiling.py [--files 2000] [--dir PATH] [--threads 1,2,4,8]

Prints files/s and the CPU (user, kernel) per file for each thread count.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
    """Files per second and user, kernel microseconds per file."""
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: write_durably(folder, n), range(files)))
    folder_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(folder_fd)
    finally:
        os.close(folder_fd)
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        folder = Path(name)
        print(f"{'threads':>7} {'files/s':>8} {'user µs':>8} {'kernel µs':>9}  ({folder})")
        for threads in (int(t) for t in args.threads.split(",")):
            rate, user, kernel = measure(folder, args.files, threads)
            print(f"{threads:>7} {rate:>8.0f} {user:>8.0f} {kernel:>9.0f}")


if __name__ == "__main__":
    main()
