"""How many workers ``reminders serve`` runs when ``--workers`` is not given."""

from __future__ import annotations

import pytest

from app.cli.serve_workers import MAX_DEFAULT_WORKERS, default_workers


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 2), (3, 3), (4, 4), (64, 4)])
def test_postgresql_runs_a_worker_per_core_up_to_the_cap(cores: int, expected: int) -> None:
    assert default_workers(is_sqlite=False, cores=cores) == expected
    assert MAX_DEFAULT_WORKERS == 4  # each worker holds its own pools: 4 x (16 + 1) = 68


@pytest.mark.parametrize("cores", [1, 2, 64])
def test_sqlite_runs_one_worker_whatever_the_cores(cores: int) -> None:
    assert default_workers(is_sqlite=True, cores=cores) == 1


def test_a_machine_reporting_no_core_still_runs_one() -> None:
    assert default_workers(is_sqlite=False, cores=0) == 1
