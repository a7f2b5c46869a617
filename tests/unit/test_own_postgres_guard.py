"""The drills' own PostgreSQL cluster: without server binaries a drill is skipped on a
developer's machine but fails under ``REMINDERS_CI``, so no drill passes CI by not running."""

import pytest

from tests.support import own_postgres as own_postgres_module


@pytest.fixture
def no_server_binaries(monkeypatch):
    monkeypatch.setattr(own_postgres_module, "_bin_dir", lambda: None)


def test_missing_server_binaries_skip_outside_ci(no_server_binaries, monkeypatch):
    monkeypatch.delenv("REMINDERS_CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="initdb"), own_postgres_module.own_postgres():
        pass


def test_missing_server_binaries_fail_under_ci(no_server_binaries, monkeypatch):
    monkeypatch.setenv("REMINDERS_CI", "1")
    with (
        pytest.raises(pytest.fail.Exception, match="REMINDERS_CI is set"),
        own_postgres_module.own_postgres(),
    ):
        pass
