"""What a server did with each call, counted where it happens (on worker threads and on the event loop alike, so
under a lock): tests that wait for those counts instead of guessing with sleeps or timeouts."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

import codeloupe_serving.warm as warm_module

_POLLS = 600  # a tenth of a second each: up to a minute, not a speed check


class ServerCounts:
    def __init__(self, *names: str) -> None:
        self.counts = dict.fromkeys(names, 0)
        self._lock = threading.Lock()

    def count(self, what: str, by: int = 1) -> None:
        with self._lock:
            self.counts[what] += by

    def count_first_index_waits(self, monkeypatch: pytest.MonkeyPatch, what: str = "waiting") -> None:
        """Count, as `what`, the calls waiting on the event loop for a workspace's first index."""
        real_first_index = warm_module.WarmWorkspace.first_index

        async def counted_first_index(warm: warm_module.WarmWorkspace) -> None:
            self.count(what)
            try:
                await real_first_index(warm)
            finally:
                self.count(what, -1)

        monkeypatch.setattr(warm_module.WarmWorkspace, "first_index", counted_first_index)

    def wait_until(self, what: str, expected: int, calls: str = "calls") -> None:
        for _ in range(_POLLS):
            if self.counts[what] == expected:
                return
            time.sleep(0.1)
        raise AssertionError(f"{what}: {self.counts[what]} {calls}, not {expected}")

    async def wait_until_async(self, what: str, expected: int, calls: str = "calls") -> None:
        for _ in range(_POLLS):
            if self.counts[what] == expected:
                return
            await anyio.sleep(0.1)
        raise AssertionError(f"{what}: {self.counts[what]} {calls}, not {expected}")
