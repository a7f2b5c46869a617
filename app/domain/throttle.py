"""Throttling failed credential checks: per client address and for the whole process.

Each failed check (a wrong bearer token, admin login, push signature) spends one unit of
the client's budget and one of the global budget, in fixed windows. A client over its budget
is answered 429 before its credential is even compared (so a right guess is not told from a
wrong one); over the global budget every *failed* check is answered 429 too, while valid
credentials still pass (a flood of guesses cannot lock the operators out). Successful
checks cost nothing here: the push route's hot path never touches this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_CLIENTS = 10_000  # addresses tracked at once; the oldest windows are dropped beyond it


@dataclass(slots=True)
class _Window:
    started: float
    failures: int = 0


class AuthThrottle:
    """Failure budgets in fixed windows; times are ``clock()`` seconds (monotonic)."""

    def __init__(
        self,
        *,
        per_client: int,
        overall: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_client = per_client
        self.overall = overall
        self.window_seconds = window_seconds
        self.clock = clock
        self._clients: dict[str, _Window] = {}
        self._all = _Window(clock())

    def blocked(self, client: str) -> float | None:
        """Seconds until ``client`` may try again when it spent its budget, else None."""
        window = self._clients.get(client)
        if window is None or window.failures < self.per_client:
            return None
        return self._left(window, self.clock())

    def failed(self, client: str) -> float | None:
        """Count one failed check; seconds to wait when the client or everyone is now over
        budget (answer 429), None when a plain 401 is right."""
        now = self.clock()
        window = self._current(self._clients.get(client), now)
        window.failures += 1
        self._remember(client, window)
        self._all = self._current(self._all, now)
        self._all.failures += 1
        waits = [
            self._left(window, now) if window.failures > self.per_client else None,
            self._left(self._all, now) if self._all.failures > self.overall else None,
        ]
        return max((wait for wait in waits if wait is not None), default=None)

    def _current(self, window: _Window | None, now: float) -> _Window:
        if window is None or now - window.started >= self.window_seconds:
            return _Window(now)
        return window

    def _left(self, window: _Window, now: float) -> float | None:
        left = window.started + self.window_seconds - now
        return left if left > 0 else None

    def _remember(self, client: str, window: _Window) -> None:
        self._clients[client] = window
        if len(self._clients) > MAX_CLIENTS:  # dicts keep insertion order: oldest first
            del self._clients[next(iter(self._clients))]
