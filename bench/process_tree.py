"""CPU and memory of a server and its worker processes (``serve --workers N``), from /proc.

uvicorn's supervisor forks nothing itself: its workers (and multiprocessing's resource
tracker) are its children, so a server's cost is the sum over its process tree. A process
that starts between two samples counts from its start.
"""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
CpuSample = dict[int, tuple[float, float]]  # pid → (user, system) seconds


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found = [pid]
    for member in found:
        for task in Path(f"/proc/{member}/task").glob("*/children"):
            try:
                found += [int(child) for child in task.read_text().split()]
            except OSError:
                continue  # the thread ended meanwhile
    return found


def worker_count(pid: int) -> int:
    """uvicorn workers under ``pid`` (its multiprocessing-spawned children; not the resource
    tracker), or 1: the process itself serves."""
    workers = 0
    for child in process_tree(pid)[1:]:
        try:
            workers += b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue  # exited meanwhile
    return workers or 1


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far, its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def tree_cpu(pid: int) -> CpuSample:
    """User and system CPU seconds of each process of ``pid``'s tree so far."""
    used: CpuSample = {}
    for member in process_tree(pid):
        try:
            used[member] = cpu_split(member)
        except OSError:
            continue  # exited meanwhile
    return used


def cpu_since(before: CpuSample, after: CpuSample) -> tuple[float, float]:
    """User and system CPU seconds a process tree used between two samples."""
    user = sum(u - before.get(pid, (0.0, 0.0))[0] for pid, (u, _) in after.items())
    system = sum(s - before.get(pid, (0.0, 0.0))[1] for pid, (_, s) in after.items())
    return user, system


def rss_mb(pid: int) -> float:
    """A process's resident memory now (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pss_mb(pid: int) -> float:
    """A process's proportional share of resident memory (Pss: each page shared by N
    processes counts 1/N in each), in MB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree_memory_mb(pid: int) -> dict[int, tuple[float, float]]:
    """RSS and PSS of each process of ``pid``'s tree now, in MB."""
    found: dict[int, tuple[float, float]] = {}
    for member in process_tree(pid):
        try:
            found[member] = (rss_mb(member), pss_mb(member))
        except OSError:
            continue  # exited meanwhile
    return found
