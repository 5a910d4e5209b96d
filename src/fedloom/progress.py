"""Progress reporting without a UI dependency: layers report, the CLI decides how to show it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Advance = Callable[[int], None]


class Progress(Protocol):
    def task(self, description: str, total: int) -> Advance:
        """Start a task with ``total`` units; call the returned function with units done."""
        ...


class SilentProgress:
    """Reports nothing (library use, tests)."""

    def task(self, description: str, total: int) -> Advance:
        return lambda n: None


class LineProgress:
    """One plain line per step of a short task (rounds) and per tenth of a long one (feature passes) — or,
    for a long one, per ``every`` seconds if a tenth takes longer (CSI300's 35,337-prompt pass would log
    once in ~1.5 h) — with the seconds since the task started: progress a log file or a pipe can show. A
    short task started inside another (a round's local training, client by client) adds no line of its
    own: one line per round."""

    def __init__(
        self, write: Callable[[str], None], clock: Callable[[], float] | None = None, every: float = 300.0
    ) -> None:
        import time

        self.write = write
        self.clock = clock or time.monotonic
        self.every = every
        self.open = 0  # tasks started and not yet done

    def task(self, description: str, total: int) -> Advance:
        start, done, shown = self.clock(), [0], [0]
        last = [start]
        long = total > 20
        step = max(1, total // 10) if long else 1
        quiet = self.open > 0 and not long
        self.open += total > 0  # an empty task never advances: it is never open

        def advance(n: int) -> None:
            finished = done[0] < total <= done[0] + n
            done[0] += n
            now = self.clock()
            due = done[0] - shown[0] >= step or (long and now - last[0] >= self.every and done[0] > shown[0])
            if not quiet and (due or (done[0] >= total > shown[0])):
                shown[0], last[0] = done[0], now
                self.write(f"{description}: {done[0]}/{total} ({now - start:.1f} s)")
            if finished:
                self.open -= 1

        return advance
